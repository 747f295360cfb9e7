// AVX2/F16C row conversions float32 -> F16 / BF16 for quantize_row, giving
// the same bits as the scalar float_to_half_bits / float_to_bf16_bits.
#include "quant/avx2_common.h"
#include "quant/half_bits.h"
#include "quant/kernels.h"

namespace ds4::quant_kernels {

void fp32_to_fp16_row_avx2(const float* x, uint16_t* y, int64_t n) {
    int64_t i = 0;
    const __m128i quiet_nan = _mm_set1_epi16(0x7E00);
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
        // F16C keeps a NaN's payload; ggml (and our scalar path) writes the
        // canonical quiet NaN with the sign, so patch those lanes.
        const __m256i nan32 = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        const __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan32), _mm256_extracti128_si256(nan32, 1));
        const __m256i sign32 = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(v), 16), _mm256_set1_epi32(0x8000));
        const __m128i sign16 = _mm_packus_epi32(_mm256_castsi256_si128(sign32), _mm256_extracti128_si256(sign32, 1));
        h = _mm_blendv_epi8(h, _mm_or_si128(sign16, quiet_nan), nan16);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
    }
    for (; i < n; ++i) y[i] = float_to_half_bits(x[i]);
}

void fp32_to_bf16_row_avx2(const float* x, uint16_t* y, int64_t n) {
    int64_t i = 0;
    const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
    const __m256i bias = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(64);
    auto convert8 = [&](const float* p) {
        const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(p));
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
        const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);  // round half to even
        const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, odd)), 16);
        const __m256i quieted = _mm256_or_si256(_mm256_srli_epi32(u, 16), quiet);
        return _mm256_blendv_epi8(rounded, quieted, nan);
    };
    for (; i + 16 <= n; i += 16) {
        // packus interleaves 128-bit lanes; the permute puts them back in order.
        const __m256i packed = _mm256_packus_epi32(convert8(x + i), convert8(x + i + 8));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm256_permute4x64_epi64(packed, 0xD8));
    }
    for (; i < n; ++i) y[i] = float_to_bf16_bits(x[i]);
}

}  // namespace ds4::quant_kernels

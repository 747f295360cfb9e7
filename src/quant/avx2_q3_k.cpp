// AVX2 kernels for Q3_K. Each (half, plane) of a super-block is 32
// consecutive elements whose low bits are a 2-bit plane of 32 qs bytes and
// whose high bits are one bit of the 32 hmask bytes: both are unpacked into
// signed bytes in one go, then widened to floats 8 at a time.
#pragma GCC optimize("fp-contract=off")  // dequantization must round exactly like the scalar reference

#include "quant/avx2_bytes32.h"
#include "quant/avx2_common.h"
#include "quant/block_layouts_fallback.h"
#include "quant/kernels.h"

namespace ds4::quant_kernels {
namespace {

constexpr int kN = kSuperBlockElems;

// Sub-block factors d * (sc - 32), each rounded to float as ggml does.
inline void sub_block_factors(const BlockQ3K& b, float (&dl)[16]) {
    int8_t sc[16];
    q3_k_scales(b.scales, sc);
    const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sc));
    const __m256 d = _mm256_set1_ps(half_at(b.d));
    _mm256_storeu_ps(dl, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s))));
    _mm256_storeu_ps(dl + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(s, 8)))));
}

// Quants q - (high bit ? 0 : 4) of elements 128*half + 32*plane + 0..31.
inline void plane_values(__m256i qs, __m256i hmask, int half, int plane, __m256 (&f)[4]) {
    const __m256i low = _mm256_and_si256(_mm256_srl_epi16(qs, _mm_cvtsi32_si128(2 * plane)), _mm256_set1_epi8(3));
    const __m256i high = _mm256_and_si256(_mm256_srl_epi16(hmask, _mm_cvtsi32_si128(4 * half + plane)), _mm256_set1_epi8(1));
    // high is 0 or 1 per byte, so the 16-bit shift cannot carry across bytes.
    const __m256i v = _mm256_sub_epi8(_mm256_or_si256(low, _mm256_slli_epi16(high, 2)), _mm256_set1_epi8(4));
    i8x32_to_ps(v, f);
}

inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

}  // namespace

void dequantize_q3_k_avx2(const void* x, float* y, int64_t n) {
    const auto* blocks = static_cast<const BlockQ3K*>(x);
    for (int64_t i = 0; i < n / kN; ++i) {
        const BlockQ3K& b = blocks[i];
        float dl[16];
        sub_block_factors(b, dl);
        const __m256i hmask = load32(b.hmask);
        for (int half = 0; half < 2; ++half) {
            const __m256i qs = load32(b.qs + 32 * half);
            for (int plane = 0; plane < 4; ++plane) {
                __m256 f[4];
                plane_values(qs, hmask, half, plane, f);
                const int is = 8 * half + 2 * plane;  // the 32 elements are sub-blocks is and is+1
                const __m256 d0 = _mm256_set1_ps(dl[is]), d1 = _mm256_set1_ps(dl[is + 1]);
                float* out = y + i * kN + 128 * half + 32 * plane;
                _mm256_storeu_ps(out + 0, _mm256_mul_ps(d0, f[0]));
                _mm256_storeu_ps(out + 8, _mm256_mul_ps(d0, f[1]));
                _mm256_storeu_ps(out + 16, _mm256_mul_ps(d1, f[2]));
                _mm256_storeu_ps(out + 24, _mm256_mul_ps(d1, f[3]));
            }
        }
    }
}

// Quants meet x in float per sub-block of 16, the sub-block factor once per
// sub-block (two chains); each super-block's sum goes to the double total.
float dot_q3_k_avx2(const void* w, const float* x, int64_t n) {
    const auto* blocks = static_cast<const BlockQ3K*>(w);
    __m256d total = _mm256_setzero_pd();
    for (int64_t i = 0; i < n / kN; ++i) {
        const BlockQ3K& b = blocks[i];
        float dl[16];
        sub_block_factors(b, dl);
        const __m256i hmask = load32(b.hmask);
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        for (int half = 0; half < 2; ++half) {
            const __m256i qs = load32(b.qs + 32 * half);
            for (int plane = 0; plane < 4; ++plane) {
                __m256 f[4];
                plane_values(qs, hmask, half, plane, f);
                const int is = 8 * half + 2 * plane;
                const float* xs = x + i * kN + 128 * half + 32 * plane;
                acc0 = _mm256_fmadd_ps(_mm256_set1_ps(dl[is]), dot16(f, 0, xs), acc0);
                acc1 = _mm256_fmadd_ps(_mm256_set1_ps(dl[is + 1]), dot16(f, 2, xs + 16), acc1);
            }
        }
        total = add_to_double(total, _mm256_add_ps(acc0, acc1));
    }
    return static_cast<float>(hsum(total));
}

}  // namespace ds4::quant_kernels

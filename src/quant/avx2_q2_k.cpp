// AVX2 kernels for Q2_K: 16 sub-blocks of 16 with 4-bit scale and min,
// x = (d*sc) * q - (dmin*m), q in 0..3 taken from four 2-bit planes.
#pragma GCC optimize("fp-contract=off")  // dequantization must round exactly like the scalar reference

#include "quant/avx2_common.h"
#include "quant/block_layouts.h"
#include "quant/kernels.h"

namespace ds4::quant_kernels {
namespace {

constexpr int kN = kSuperBlockElems;

// d * (sc & 15) and dmin * (sc >> 4) for the 16 sub-blocks, rounded as ggml does.
inline void sub_block_factors(const BlockQ2K& b, float (&dl)[16], float (&ml)[16]) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    const __m128i low4 = _mm_set1_epi8(0xF);
    const __m128i sc = _mm_and_si128(v, low4), m = _mm_and_si128(_mm_srli_epi16(v, 4), low4);
    const __m256 d = _mm256_set1_ps(half_at(b.d)), dmin = _mm256_set1_ps(half_at(b.dmin));
    auto to_ps = [](__m128i bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)); };
    _mm256_storeu_ps(dl, _mm256_mul_ps(to_ps(sc), d));
    _mm256_storeu_ps(dl + 8, _mm256_mul_ps(to_ps(_mm_srli_si128(sc, 8)), d));
    _mm256_storeu_ps(ml, _mm256_mul_ps(to_ps(m), dmin));
    _mm256_storeu_ps(ml + 8, _mm256_mul_ps(to_ps(_mm_srli_si128(m, 8)), dmin));
}

// Layout: element half*128 + plane*32 + 8k + l (k = 0..3, l = 0..7) is bits
// 2*plane..2*plane+1 of qs[half*32 + 8k + l]; its sub-block is half*8 + plane*2 + k/2.
template <class Sink>
inline void for_each_group(const BlockQ2K& b, Sink&& sink) {
    const __m256i three = _mm256_set1_epi32(3);
    for (int half = 0; half < 2; ++half) {
        for (int k = 0; k < 4; ++k) {
            const __m256i v = u8x8_to_epi32(b.qs + 32 * half + 8 * k);
            for (int plane = 0; plane < 4; ++plane) {
                const __m256i q = _mm256_and_si256(_mm256_srl_epi32(v, _mm_cvtsi32_si128(2 * plane)), three);
                sink(_mm256_cvtepi32_ps(q), half * 8 + plane * 2 + k / 2, half * 128 + plane * 32 + 8 * k, plane + 4 * (k & 1));
            }
        }
    }
}

}  // namespace

void dequantize_q2_k_avx2(const void* xv, float* y, int64_t n) {
    const auto* blocks = static_cast<const BlockQ2K*>(xv);
    for (int64_t i = 0; i < n / kN; ++i) {
        float dl[16], ml[16];
        sub_block_factors(blocks[i], dl, ml);
        float* out = y + i * kN;
        for_each_group(blocks[i], [&](__m256 q, int sub, int at, int) {
            _mm256_storeu_ps(out + at, _mm256_sub_ps(_mm256_mul_ps(q, _mm256_set1_ps(dl[sub])), _mm256_set1_ps(ml[sub])));
        });
    }
}

float dot_q2_k_avx2(const void* wv, const float* x, int64_t n) {
    const auto* blocks = static_cast<const BlockQ2K*>(wv);
    __m256d total = _mm256_setzero_pd();
    for (int64_t i = 0; i < n / kN; ++i) {
        float dl[16], ml[16];
        sub_block_factors(blocks[i], dl, ml);
        const float* xb = x + i * kN;
        __m256 acc[8];  // eight FMA chains: enough to cover the FMA latency
        for (auto& a : acc) a = _mm256_setzero_ps();
        for_each_group(blocks[i], [&](__m256 q, int sub, int at, int chain) {
            const __m256 w = _mm256_fmsub_ps(q, _mm256_set1_ps(dl[sub]), _mm256_set1_ps(ml[sub]));
            acc[chain] = _mm256_fmadd_ps(w, _mm256_loadu_ps(xb + at), acc[chain]);
        });
        for (int c = 0; c < 4; ++c) acc[c] = _mm256_add_ps(acc[c], acc[c + 4]);
        total = add_to_double(total, _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    }
    return static_cast<float>(hsum(total));
}

}  // namespace ds4::quant_kernels

// AVX2 kernels for Q4_K and Q5_K: super-blocks of 8 sub-blocks of 32 with a
// 6-bit scale and min each, x = (d*sc) * q - (dmin*m). The two formats differ
// only in where a quant's bits come from, so one kernel serves both.
#pragma GCC optimize("fp-contract=off")  // dequantization must round exactly like the scalar reference

#include "quant/avx2_common.h"
#include "quant/block_layouts.h"
#include "quant/kernels.h"

namespace ds4::quant_kernels {
namespace {

constexpr int kN = kSuperBlockElems;

// Quants of elements 8k..8k+7 of sub-blocks 2p (lo) and 2p+1 (hi), as floats.
inline void quants(const BlockQ4K& b, int p, int k, __m256& lo, __m256& hi) {
    const __m256i v = u8x8_to_epi32(b.qs + 32 * p + 8 * k);
    lo = _mm256_cvtepi32_ps(_mm256_and_si256(v, _mm256_set1_epi32(0xF)));
    hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4));
}

inline void quants(const BlockQ5K& b, int p, int k, __m256& lo, __m256& hi) {
    const __m256i v = u8x8_to_epi32(b.qs + 32 * p + 8 * k);
    // Bit 2p of qh[l] is the fifth bit of sub-block 2p's element l, bit 2p+1 of 2p+1's.
    const __m256i h = _mm256_srl_epi32(u8x8_to_epi32(b.qh + 8 * k), _mm_cvtsi32_si128(2 * p));
    const __m256i sixteen = _mm256_set1_epi32(16);
    const __m256i h_lo = _mm256_and_si256(_mm256_slli_epi32(h, 4), sixteen);
    const __m256i h_hi = _mm256_and_si256(_mm256_slli_epi32(h, 3), sixteen);
    lo = _mm256_cvtepi32_ps(_mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xF)), h_lo));
    hi = _mm256_cvtepi32_ps(_mm256_or_si256(_mm256_srli_epi32(v, 4), h_hi));
}

// Per-sub-block factors d*sc and dmin*m, each rounded to float as ggml does.
// The 12 packed bytes are unpacked four at a time (same bit moves as
// k_scale_min): sc[0..3], m[0..3] are the low 6 bits of bytes 0..3, 4..7;
// sc[4..7], m[4..7] take the low/high nibbles of bytes 8..11 and the top two
// bits of bytes 0..3 / 4..7.
template <class Block>
inline void sub_block_factors(const Block& b, float (&dl)[8], float (&ml)[8]) {
    const uint32_t u0 = load_u32(b.scales), u1 = load_u32(b.scales + 4), u2 = load_u32(b.scales + 8);
    const uint32_t sc_lo = u0 & 0x3F3F3F3Fu;
    const uint32_t m_lo = u1 & 0x3F3F3F3Fu;
    const uint32_t sc_hi = (u2 & 0x0F0F0F0Fu) | (((u0 >> 6) & 0x03030303u) << 4);
    const uint32_t m_hi = ((u2 >> 4) & 0x0F0F0F0Fu) | (((u1 >> 6) & 0x03030303u) << 4);
    const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_setr_epi32(static_cast<int>(sc_lo), static_cast<int>(sc_hi), 0, 0)));
    const __m256 m = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_setr_epi32(static_cast<int>(m_lo), static_cast<int>(m_hi), 0, 0)));
    _mm256_storeu_ps(dl, _mm256_mul_ps(sc, _mm256_set1_ps(half_at(b.d))));
    _mm256_storeu_ps(ml, _mm256_mul_ps(m, _mm256_set1_ps(half_at(b.dmin))));
}

template <class Block>
void dequantize_k(const void* xv, float* y, int64_t n) {
    const auto* blocks = static_cast<const Block*>(xv);
    for (int64_t i = 0; i < n / kN; ++i) {
        float dl[8], ml[8];
        sub_block_factors(blocks[i], dl, ml);
        float* out = y + i * kN;
        for (int p = 0; p < 4; ++p) {
            const __m256 d1 = _mm256_set1_ps(dl[2 * p]), m1 = _mm256_set1_ps(ml[2 * p]);
            const __m256 d2 = _mm256_set1_ps(dl[2 * p + 1]), m2 = _mm256_set1_ps(ml[2 * p + 1]);
            for (int k = 0; k < 4; ++k) {
                __m256 lo, hi;
                quants(blocks[i], p, k, lo, hi);
                _mm256_storeu_ps(out + 64 * p + 8 * k, _mm256_sub_ps(_mm256_mul_ps(lo, d1), m1));
                _mm256_storeu_ps(out + 64 * p + 32 + 8 * k, _mm256_sub_ps(_mm256_mul_ps(hi, d2), m2));
            }
        }
    }
}

// Weights are formed in registers (one FMA each) and multiplied into eight
// independent accumulators; each super-block's sum goes to the double total.
template <class Block>
float dot_k(const void* wv, const float* x, int64_t n) {
    const auto* blocks = static_cast<const Block*>(wv);
    __m256d total = _mm256_setzero_pd();
    for (int64_t i = 0; i < n / kN; ++i) {
        float dl[8], ml[8];
        sub_block_factors(blocks[i], dl, ml);
        const float* xb = x + i * kN;
        __m256 acc_lo[4], acc_hi[4];
        for (int k = 0; k < 4; ++k) acc_lo[k] = acc_hi[k] = _mm256_setzero_ps();
        for (int p = 0; p < 4; ++p) {
            const __m256 d1 = _mm256_set1_ps(dl[2 * p]), m1 = _mm256_set1_ps(ml[2 * p]);
            const __m256 d2 = _mm256_set1_ps(dl[2 * p + 1]), m2 = _mm256_set1_ps(ml[2 * p + 1]);
            for (int k = 0; k < 4; ++k) {
                __m256 lo, hi;
                quants(blocks[i], p, k, lo, hi);
                acc_lo[k] = _mm256_fmadd_ps(_mm256_fmsub_ps(lo, d1, m1), _mm256_loadu_ps(xb + 64 * p + 8 * k), acc_lo[k]);
                acc_hi[k] = _mm256_fmadd_ps(_mm256_fmsub_ps(hi, d2, m2), _mm256_loadu_ps(xb + 64 * p + 32 + 8 * k),
                                            acc_hi[k]);
            }
        }
        const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc_lo[0], acc_lo[1]), _mm256_add_ps(acc_lo[2], acc_lo[3])),
                                       _mm256_add_ps(_mm256_add_ps(acc_hi[0], acc_hi[1]), _mm256_add_ps(acc_hi[2], acc_hi[3])));
        total = add_to_double(total, s);
    }
    return static_cast<float>(hsum(total));
}

}  // namespace

void dequantize_q4_k_avx2(const void* x, float* y, int64_t n) { dequantize_k<BlockQ4K>(x, y, n); }
float dot_q4_k_avx2(const void* w, const float* x, int64_t n) { return dot_k<BlockQ4K>(w, x, n); }
void dequantize_q5_k_avx2(const void* x, float* y, int64_t n) { dequantize_k<BlockQ5K>(x, y, n); }
float dot_q5_k_avx2(const void* w, const float* x, int64_t n) { return dot_k<BlockQ5K>(w, x, n); }

}  // namespace ds4::quant_kernels

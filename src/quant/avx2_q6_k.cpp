// AVX2 kernels for Q6_K: 16 sub-blocks of 16 with signed 8-bit scales,
// x = (d*sc) * (q - 32), q in 0..63 from 4 low bits (ql) and 2 high bits (qh).
#pragma GCC optimize("fp-contract=off")  // dequantization must round exactly like the scalar reference

#include "quant/avx2_common.h"
#include "quant/block_layouts.h"
#include "quant/kernels.h"

namespace ds4::quant_kernels {
namespace {

constexpr int kN = kSuperBlockElems;

// d * sc for the 16 sub-blocks, rounded as ggml does.
inline void sub_block_factors(const BlockQ6K& b, float (&ds)[16]) {
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    const __m256 d = _mm256_set1_ps(half_at(b.d));
    _mm256_storeu_ps(ds, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)), d));
    _mm256_storeu_ps(ds + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8))), d));
}

// Per 128 elements (half): for l in 0..31, ql[l] low/high nibble and
// ql[l+32] low/high nibble give elements l, l+64 and l+32, l+96; qh[l]
// holds their high bits in pairs 0-1, 4-5, 2-3, 6-7. Sub-block of element
// half*128 + 32*r + l is half*8 + 2*r + l/16.
//
// The 6-bit quants of 32 elements are assembled at once in bytes (16-bit
// shifts are fine: the masks drop the bits that cross a byte), then widened
// eight at a time to float.
template <class Sink>
inline void for_each_group(const BlockQ6K& b, Sink&& sink) {
    const __m256i low4 = _mm256_set1_epi8(0xF), high2 = _mm256_set1_epi8(0x30), bias = _mm256_set1_epi8(32);
    for (int half = 0; half < 2; ++half) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * half));
        const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * half + 32));
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * half));
        const __m256i q[4] = {
            _mm256_or_si256(_mm256_and_si256(a, low4), _mm256_and_si256(_mm256_slli_epi16(h, 4), high2)),
            _mm256_or_si256(_mm256_and_si256(c, low4), _mm256_and_si256(_mm256_slli_epi16(h, 2), high2)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low4), _mm256_and_si256(h, high2)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), low4), _mm256_and_si256(_mm256_srli_epi16(h, 2), high2)),
        };
        for (int r = 0; r < 4; ++r) {
            const __m256i v = _mm256_sub_epi8(q[r], bias);  // -32..31
            const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
            const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
            for (int k = 0; k < 4; ++k)
                sink(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[k])), half * 8 + 2 * r + k / 2,
                     half * 128 + 32 * r + 8 * k, r + 4 * (k & 1));
        }
    }
}

}  // namespace

void dequantize_q6_k_avx2(const void* xv, float* y, int64_t n) {
    const auto* blocks = static_cast<const BlockQ6K*>(xv);
    for (int64_t i = 0; i < n / kN; ++i) {
        float ds[16];
        sub_block_factors(blocks[i], ds);
        float* out = y + i * kN;
        for_each_group(blocks[i], [&](__m256 q, int sub, int at, int) {
            _mm256_storeu_ps(out + at, _mm256_mul_ps(q, _mm256_set1_ps(ds[sub])));
        });
    }
}

float dot_q6_k_avx2(const void* wv, const float* x, int64_t n) {
    const auto* blocks = static_cast<const BlockQ6K*>(wv);
    __m256d total = _mm256_setzero_pd();
    for (int64_t i = 0; i < n / kN; ++i) {
        float ds[16];
        sub_block_factors(blocks[i], ds);
        const float* xb = x + i * kN;
        __m256 acc[8];  // eight FMA chains: enough to cover the FMA latency
        for (auto& a : acc) a = _mm256_setzero_ps();
        for_each_group(blocks[i], [&](__m256 q, int sub, int at, int chain) {
            acc[chain] = _mm256_fmadd_ps(_mm256_mul_ps(q, _mm256_set1_ps(ds[sub])), _mm256_loadu_ps(xb + at), acc[chain]);
        });
        for (int c = 0; c < 4; ++c) acc[c] = _mm256_add_ps(acc[c], acc[c + 4]);
        total = add_to_double(total, _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    }
    return static_cast<float>(hsum(total));
}

}  // namespace ds4::quant_kernels

// AVX2 kernels for the legacy 32-element formats Q4_0, Q4_1, Q5_0, Q5_1. A
// block's 32 quants are unpacked at once into bytes (nibbles, plus the fifth
// bits of Q5_*), then widened to floats; the _0 types carry their offset in
// the signed byte, the _1 types add their half min after the scale.
#pragma GCC optimize("fp-contract=off")  // dequantization must round exactly like the scalar reference

#include "quant/avx2_bytes32.h"
#include "quant/avx2_common.h"
#include "quant/block_layouts_fallback.h"
#include "quant/kernels.h"

namespace ds4::quant_kernels {
namespace {

constexpr int kN = kLegacyBlockElems;

// The block's quants as bytes in element order: q - 8 / q - 16 for the _0
// types (signed), q for the _1 types.
inline __m256i codes(const BlockQ4_0& b) { return _mm256_sub_epi8(nibbles_32(b.qs), _mm256_set1_epi8(8)); }
inline __m256i codes(const BlockQ4_1& b) { return nibbles_32(b.qs); }
inline __m256i codes(const BlockQ5_0& b) {
    return _mm256_sub_epi8(_mm256_or_si256(nibbles_32(b.qs), bits_to_0x10_bytes(load_u32(b.qh))), _mm256_set1_epi8(16));
}
inline __m256i codes(const BlockQ5_1& b) {
    return _mm256_or_si256(nibbles_32(b.qs), bits_to_0x10_bytes(load_u32(b.qh)));
}

template <class Block>
constexpr bool kHasMin = requires(const Block& b) { b.m; };

template <class Block>
void dequantize_legacy(const void* xv, float* y, int64_t n) {
    const auto* blocks = static_cast<const Block*>(xv);
    for (int64_t i = 0; i < n / kN; ++i) {
        __m256 f[4];
        i8x32_to_ps(codes(blocks[i]), f);
        const __m256 d = _mm256_set1_ps(half_at(blocks[i].d));
        float* out = y + i * kN;
        for (int k = 0; k < 4; ++k) {
            __m256 v = _mm256_mul_ps(f[k], d);
            if constexpr (kHasMin<Block>) v = _mm256_add_ps(v, _mm256_set1_ps(half_at(blocks[i].m)));
            _mm256_storeu_ps(out + 8 * k, v);
        }
    }
}

// One block's contribution added to acc: for the _0 types the integer quants
// meet x first and the scale once per block; the _1 types form each weight
// q*d + m in a register (one FMA) so the min cannot cancel against the sum.
template <class Block>
inline __m256 add_block(const Block& b, const float* x, __m256 acc) {
    __m256 f[4];
    i8x32_to_ps(codes(b), f);
    const __m256 d = _mm256_set1_ps(half_at(b.d));
    if constexpr (kHasMin<Block>) {
        const __m256 m = _mm256_set1_ps(half_at(b.m));
        for (auto& v : f) v = _mm256_fmadd_ps(v, d, m);
        return _mm256_add_ps(acc, _mm256_add_ps(dot16(f, 0, x), dot16(f, 2, x + 16)));
    } else {
        return _mm256_fmadd_ps(d, _mm256_add_ps(dot16(f, 0, x), dot16(f, 2, x + 16)), acc);
    }
}

// Runs of 8 blocks in float (two chains), then into the double total.
template <class Block>
float dot_legacy(const void* wv, const float* x, int64_t n) {
    const auto* blocks = static_cast<const Block*>(wv);
    const int64_t nb = n / kN;
    __m256d total = _mm256_setzero_pd();
    int64_t i = 0;
    while (i < nb) {
        const int64_t end = i + 8 < nb ? i + 8 : nb;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        for (; i + 2 <= end; i += 2) {
            acc0 = add_block(blocks[i], x + i * kN, acc0);
            acc1 = add_block(blocks[i + 1], x + (i + 1) * kN, acc1);
        }
        if (i < end) {
            acc0 = add_block(blocks[i], x + i * kN, acc0);
            ++i;
        }
        total = add_to_double(total, _mm256_add_ps(acc0, acc1));
    }
    return static_cast<float>(hsum(total));
}

}  // namespace

void dequantize_q4_0_avx2(const void* x, float* y, int64_t n) { dequantize_legacy<BlockQ4_0>(x, y, n); }
float dot_q4_0_avx2(const void* w, const float* x, int64_t n) { return dot_legacy<BlockQ4_0>(w, x, n); }
void dequantize_q4_1_avx2(const void* x, float* y, int64_t n) { dequantize_legacy<BlockQ4_1>(x, y, n); }
float dot_q4_1_avx2(const void* w, const float* x, int64_t n) { return dot_legacy<BlockQ4_1>(w, x, n); }
void dequantize_q5_0_avx2(const void* x, float* y, int64_t n) { dequantize_legacy<BlockQ5_0>(x, y, n); }
float dot_q5_0_avx2(const void* w, const float* x, int64_t n) { return dot_legacy<BlockQ5_0>(w, x, n); }
void dequantize_q5_1_avx2(const void* x, float* y, int64_t n) { dequantize_legacy<BlockQ5_1>(x, y, n); }
float dot_q5_1_avx2(const void* w, const float* x, int64_t n) { return dot_legacy<BlockQ5_1>(w, x, n); }

}  // namespace ds4::quant_kernels

// AVX2 kernels for IQ4_NL and IQ4_XS: each nibble indexes the 16-entry grid
// kIq4nlValues, which one byte shuffle (pshufb) looks up for 32 quants at once.
#pragma GCC optimize("fp-contract=off")  // dequantization must round exactly like the scalar reference

#include "quant/avx2_bytes32.h"
#include "quant/avx2_common.h"
#include "quant/block_layouts_fallback.h"
#include "quant/kernels.h"

namespace ds4::quant_kernels {
namespace {

inline __m256i grid() {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
}

// Grid values of the 32 elements packed in 16 bytes, as floats.
inline void values(const uint8_t* qs, const __m256i table, __m256 (&f)[4]) {
    i8x32_to_ps(_mm256_shuffle_epi8(table, nibbles_32(qs)), f);
}

inline void store_scaled(const __m256 (&f)[4], __m256 scale, float* out) {
    for (int k = 0; k < 4; ++k) _mm256_storeu_ps(out + 8 * k, _mm256_mul_ps(scale, f[k]));
}

// The six-bit sub-block factors d * (ls - 32) of an IQ4_XS block, each
// rounded to float as ggml does.
inline void sub_block_factors(const BlockIQ4XS& b, float (&dl)[8]) {
    const float d = half_at(b.d);
    for (int ib = 0; ib < 8; ++ib) dl[ib] = d * static_cast<float>(iq4_xs_scale(b, ib));
}

}  // namespace

void dequantize_iq4_nl_avx2(const void* x, float* y, int64_t n) {
    const auto* blocks = static_cast<const BlockIQ4NL*>(x);
    const __m256i table = grid();
    for (int64_t i = 0; i < n / kLegacyBlockElems; ++i) {
        __m256 f[4];
        values(blocks[i].qs, table, f);
        store_scaled(f, _mm256_set1_ps(half_at(blocks[i].d)), y + i * kLegacyBlockElems);
    }
}

// Runs of 8 blocks in float (two chains), then into the double total.
float dot_iq4_nl_avx2(const void* w, const float* x, int64_t n) {
    const auto* blocks = static_cast<const BlockIQ4NL*>(w);
    const __m256i table = grid();
    const int64_t nb = n / kLegacyBlockElems;
    __m256d total = _mm256_setzero_pd();
    int64_t i = 0;
    while (i < nb) {
        const int64_t end = i + 8 < nb ? i + 8 : nb;
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (; i < end; ++i) {
            __m256 f[4];
            values(blocks[i].qs, table, f);
            const float* xb = x + i * kLegacyBlockElems;
            acc[i & 1] = _mm256_fmadd_ps(_mm256_set1_ps(half_at(blocks[i].d)),
                                         _mm256_add_ps(dot16(f, 0, xb), dot16(f, 2, xb + 16)), acc[i & 1]);
        }
        total = add_to_double(total, _mm256_add_ps(acc[0], acc[1]));
    }
    return static_cast<float>(hsum(total));
}

void dequantize_iq4_xs_avx2(const void* x, float* y, int64_t n) {
    const auto* blocks = static_cast<const BlockIQ4XS*>(x);
    const __m256i table = grid();
    for (int64_t i = 0; i < n / kSuperBlockElems; ++i) {
        float dl[8];
        sub_block_factors(blocks[i], dl);
        for (int ib = 0; ib < 8; ++ib) {
            __m256 f[4];
            values(blocks[i].qs + 16 * ib, table, f);
            store_scaled(f, _mm256_set1_ps(dl[ib]), y + i * kSuperBlockElems + 32 * ib);
        }
    }
}

// Grid values meet x in float per sub-block, the sub-block factor once per
// sub-block (two chains); each super-block's sum goes to the double total.
float dot_iq4_xs_avx2(const void* w, const float* x, int64_t n) {
    const auto* blocks = static_cast<const BlockIQ4XS*>(w);
    const __m256i table = grid();
    __m256d total = _mm256_setzero_pd();
    for (int64_t i = 0; i < n / kSuperBlockElems; ++i) {
        float dl[8];
        sub_block_factors(blocks[i], dl);
        const float* xb = x + i * kSuperBlockElems;
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int ib = 0; ib < 8; ++ib) {
            __m256 f[4];
            values(blocks[i].qs + 16 * ib, table, f);
            const float* xs = xb + 32 * ib;
            acc[ib & 1] = _mm256_fmadd_ps(_mm256_set1_ps(dl[ib]), _mm256_add_ps(dot16(f, 0, xs), dot16(f, 2, xs + 16)),
                                          acc[ib & 1]);
        }
        total = add_to_double(total, _mm256_add_ps(acc[0], acc[1]));
    }
    return static_cast<float>(hsum(total));
}

}  // namespace ds4::quant_kernels

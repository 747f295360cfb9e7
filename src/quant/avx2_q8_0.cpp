// AVX2 kernels for Q8_0: 32 signed bytes and a half scale per block.
#pragma GCC optimize("fp-contract=off")  // dequantization must round exactly like the scalar reference

#include "quant/avx2_common.h"
#include "quant/block_layouts.h"
#include "quant/kernels.h"

namespace ds4::quant_kernels {
namespace {

// sum_j q[j] * x[j] over one block, in float; the block scale is applied by the caller.
inline __m256 block_qx(const BlockQ8_0& b, const float* x) {
    const __m256 p0 = _mm256_mul_ps(_mm256_cvtepi32_ps(i8x8_to_epi32(b.qs + 0)), _mm256_loadu_ps(x + 0));
    const __m256 p1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i8x8_to_epi32(b.qs + 8)), _mm256_loadu_ps(x + 8), p0);
    const __m256 p2 = _mm256_mul_ps(_mm256_cvtepi32_ps(i8x8_to_epi32(b.qs + 16)), _mm256_loadu_ps(x + 16));
    const __m256 p3 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i8x8_to_epi32(b.qs + 24)), _mm256_loadu_ps(x + 24), p2);
    return _mm256_add_ps(p1, p3);
}

}  // namespace

void dequantize_q8_0_avx2(const void* x, float* y, int64_t n) {
    const auto* blocks = static_cast<const BlockQ8_0*>(x);
    for (int64_t i = 0; i < n / kQ8_0BlockElems; ++i) {
        const __m256 d = _mm256_set1_ps(half_at(blocks[i].d));
        float* out = y + i * kQ8_0BlockElems;
        for (int g = 0; g < 4; ++g)
            _mm256_storeu_ps(out + 8 * g, _mm256_mul_ps(_mm256_cvtepi32_ps(i8x8_to_epi32(blocks[i].qs + 8 * g)), d));
    }
}

float dot_q8_0_avx2(const void* w, const float* x, int64_t n) {
    const auto* blocks = static_cast<const BlockQ8_0*>(w);
    const int64_t nb = n / kQ8_0BlockElems;
    __m256d total = _mm256_setzero_pd();
    int64_t i = 0;
    // Runs of 8 blocks in float (two chains), then into the double total.
    while (i < nb) {
        const int64_t end = i + 8 < nb ? i + 8 : nb;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        for (; i + 2 <= end; i += 2) {
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(half_at(blocks[i].d)), block_qx(blocks[i], x + i * 32), acc0);
            acc1 = _mm256_fmadd_ps(_mm256_set1_ps(half_at(blocks[i + 1].d)),
                                   block_qx(blocks[i + 1], x + (i + 1) * 32), acc1);
        }
        if (i < end) {
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(half_at(blocks[i].d)), block_qx(blocks[i], x + i * 32), acc0);
            ++i;
        }
        total = add_to_double(total, _mm256_add_ps(acc0, acc1));
    }
    return static_cast<float>(hsum(total));
}

}  // namespace ds4::quant_kernels

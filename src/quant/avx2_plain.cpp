// AVX2 kernels for the unblocked float types: F32, F16 (F16C) and BF16.
#pragma GCC optimize("fp-contract=off")  // dequantization must round exactly like the scalar reference

#include "quant/avx2_common.h"
#include "quant/half_bits.h"
#include "quant/kernels.h"

namespace ds4::quant_kernels {
namespace {

struct F32Weights {
    static __m256 load8(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
    static float load1(const uint8_t* p) {
        float v;
        std::memcpy(&v, p, 4);
        return v;
    }
    static constexpr int kBytes = 4;
};

struct F16Weights {
    static __m256 load8(const uint8_t* p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    static float load1(const uint8_t* p) { return half_at(p); }
    static constexpr int kBytes = 2;
};

struct BF16Weights {
    static __m256 load8(const uint8_t* p) {
        const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    }
    static float load1(const uint8_t* p) {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return bf16_bits_to_float(h);
    }
    static constexpr int kBytes = 2;
};

// Four independent FMA chains over runs of 256 elements; each run's float
// sum goes into a double accumulator.
template <class W>
float dot_plain(const void* wv, const float* x, int64_t n) {
    const auto* w = static_cast<const uint8_t*>(wv);
    __m256d total = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 256 <= n; i += 256) {
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
        for (int k = 0; k < 256; k += 32) {
            const int64_t j = i + k;
            a0 = _mm256_fmadd_ps(W::load8(w + (j + 0) * W::kBytes), _mm256_loadu_ps(x + j + 0), a0);
            a1 = _mm256_fmadd_ps(W::load8(w + (j + 8) * W::kBytes), _mm256_loadu_ps(x + j + 8), a1);
            a2 = _mm256_fmadd_ps(W::load8(w + (j + 16) * W::kBytes), _mm256_loadu_ps(x + j + 16), a2);
            a3 = _mm256_fmadd_ps(W::load8(w + (j + 24) * W::kBytes), _mm256_loadu_ps(x + j + 24), a3);
        }
        total = add_to_double(total, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    }
    __m256 rest = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) rest = _mm256_fmadd_ps(W::load8(w + i * W::kBytes), _mm256_loadu_ps(x + i), rest);
    total = add_to_double(total, rest);
    double sum = hsum(total);
    for (; i < n; ++i) sum += static_cast<double>(W::load1(w + i * W::kBytes)) * x[i];
    return static_cast<float>(sum);
}

template <class W>
void dequantize_plain(const void* xv, float* y, int64_t n) {
    const auto* x = static_cast<const uint8_t*>(xv);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, W::load8(x + i * W::kBytes));
    for (; i < n; ++i) y[i] = W::load1(x + i * W::kBytes);
}

}  // namespace

float dot_f32_avx2(const void* w, const float* x, int64_t n) { return dot_plain<F32Weights>(w, x, n); }
float dot_f16_avx2(const void* w, const float* x, int64_t n) { return dot_plain<F16Weights>(w, x, n); }
float dot_bf16_avx2(const void* w, const float* x, int64_t n) { return dot_plain<BF16Weights>(w, x, n); }
void dequantize_f16_avx2(const void* x, float* y, int64_t n) { dequantize_plain<F16Weights>(x, y, n); }
void dequantize_bf16_avx2(const void* x, float* y, int64_t n) { dequantize_plain<BF16Weights>(x, y, n); }

}  // namespace ds4::quant_kernels

// Scalar reference for the unblocked float types: F32, F16 and BF16.
#include <cstring>

#include "quant/half_bits.h"
#include "quant/kernels.h"

namespace ds4::quant_kernels {
namespace {

uint16_t u16_at(const void* p, int64_t i) {
    uint16_t v;
    std::memcpy(&v, static_cast<const uint8_t*>(p) + 2 * i, 2);
    return v;
}

float f32_at(const void* p, int64_t i) {
    float v;
    std::memcpy(&v, static_cast<const uint8_t*>(p) + 4 * i, 4);
    return v;
}

}  // namespace

void dequantize_f32_scalar(const void* x, float* y, int64_t n) {
    if (n > 0) std::memmove(y, x, static_cast<size_t>(n) * sizeof(float));
}

float dot_f32_scalar(const void* w, const float* x, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(f32_at(w, i)) * x[i];
    return static_cast<float>(sum);
}

void dequantize_f16_scalar(const void* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = half_bits_to_float(u16_at(x, i));
}

float dot_f16_scalar(const void* w, const float* x, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(half_bits_to_float(u16_at(w, i))) * x[i];
    return static_cast<float>(sum);
}

void dequantize_bf16_scalar(const void* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = bf16_bits_to_float(u16_at(x, i));
}

float dot_bf16_scalar(const void* w, const float* x, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(bf16_bits_to_float(u16_at(w, i))) * x[i];
    return static_cast<float>(sum);
}

}  // namespace ds4::quant_kernels

// Public float16 / bfloat16 conversions: the exact scalar code of
// half_bits.h, and row forms that use F16C/AVX2 when the CPU has them.
#include "common/error.h"
#include "quant/half_bits.h"
#include "quant/kernels.h"
#include "quant/quant.h"

namespace ds4 {
namespace qk = quant_kernels;

float fp16_to_fp32(uint16_t h) { return half_bits_to_float(h); }
uint16_t fp32_to_fp16(float f) { return float_to_half_bits(f); }
float bf16_to_fp32(uint16_t h) { return bf16_bits_to_float(h); }
uint16_t fp32_to_bf16(float f) { return float_to_bf16_bits(f); }

namespace {
void check_count(int64_t n, const char* op) {
    if (n < 0) throw Error(std::string(op) + " was asked to convert a negative number of values (" + std::to_string(n) + ").");
}
}  // namespace

void fp16_to_fp32_row(const uint16_t* x, float* y, int64_t n) {
    check_count(n, "fp16_to_fp32_row");
    (qk::avx2_usable() ? qk::dequantize_f16_avx2 : qk::dequantize_f16_scalar)(x, y, n);
}

void bf16_to_fp32_row(const uint16_t* x, float* y, int64_t n) {
    check_count(n, "bf16_to_fp32_row");
    (qk::avx2_usable() ? qk::dequantize_bf16_avx2 : qk::dequantize_bf16_scalar)(x, y, n);
}

void fp32_to_fp16_row(const float* x, uint16_t* y, int64_t n) {
    check_count(n, "fp32_to_fp16_row");
    if (qk::avx2_usable()) return qk::fp32_to_fp16_row_avx2(x, y, n);
    for (int64_t i = 0; i < n; ++i) y[i] = float_to_half_bits(x[i]);
}

void fp32_to_bf16_row(const float* x, uint16_t* y, int64_t n) {
    check_count(n, "fp32_to_bf16_row");
    if (qk::avx2_usable()) return qk::fp32_to_bf16_row_avx2(x, y, n);
    for (int64_t i = 0; i < n; ++i) y[i] = float_to_bf16_bits(x[i]);
}

}  // namespace ds4

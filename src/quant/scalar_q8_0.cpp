// Scalar reference for Q8_0: blocks of 32 signed bytes and one half scale,
// x = q * d, exactly as ggml's dequantize_row_q8_0 rounds it.
#pragma GCC optimize("fp-contract=off")  // keep ggml's separately rounded products even under -mfma

#include "quant/block_layouts.h"
#include "quant/half_bits.h"
#include "quant/kernels.h"

namespace ds4::quant_kernels {
namespace {

void dequantize_block(const BlockQ8_0& b, float* y) {
    const float d = half_bits_to_float(load_u16(b.d));
    for (int j = 0; j < kQ8_0BlockElems; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
}

}  // namespace

void dequantize_q8_0_scalar(const void* x, float* y, int64_t n) {
    const auto* blocks = static_cast<const BlockQ8_0*>(x);
    for (int64_t i = 0; i < n / kQ8_0BlockElems; ++i) dequantize_block(blocks[i], y + i * kQ8_0BlockElems);
}

float dot_q8_0_scalar(const void* w, const float* x, int64_t n) {
    const auto* blocks = static_cast<const BlockQ8_0*>(w);
    double sum = 0.0;
    float tmp[kQ8_0BlockElems];
    for (int64_t i = 0; i < n / kQ8_0BlockElems; ++i) {
        dequantize_block(blocks[i], tmp);
        for (int j = 0; j < kQ8_0BlockElems; ++j) sum += static_cast<double>(tmp[j]) * x[i * kQ8_0BlockElems + j];
    }
    return static_cast<float>(sum);
}

}  // namespace ds4::quant_kernels

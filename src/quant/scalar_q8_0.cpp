// Scalar reference for Q8_0: blocks of 32 signed bytes and one half scale,
// x = q * d, exactly as ggml's dequantize_row_q8_0 rounds it.
#pragma GCC optimize("fp-contract=off")  // keep ggml's separately rounded products even under -mfma

#include "quant/block_layouts.h"
#include "quant/half_bits.h"
#include "quant/kernels.h"
#include "quant/scalar_rows.h"

namespace ds4::quant_kernels {
namespace {

void dequantize_block(const BlockQ8_0& b, float* y) {
    const float d = half_bits_to_float(load_u16(b.d));
    for (int j = 0; j < kQ8_0BlockElems; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
}

}  // namespace

void dequantize_q8_0_scalar(const void* x, float* y, int64_t n) {
    dequantize_blocks<BlockQ8_0, kQ8_0BlockElems>(x, y, n, [](const BlockQ8_0& b, float* out) { dequantize_block(b, out); });
}

float dot_q8_0_scalar(const void* w, const float* x, int64_t n) {
    return dot_blocks<BlockQ8_0, kQ8_0BlockElems>(w, x, n, [](const BlockQ8_0& b, float* out) { dequantize_block(b, out); });
}

}  // namespace ds4::quant_kernels

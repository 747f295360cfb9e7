// Scalar reference for the legacy 32-element formats Q4_0, Q4_1, Q5_0, Q5_1.
// Each decode is ggml's dequantize_row_* expression for expression: the quant
// is converted to float, multiplied by the half scale and (for the _1 types)
// the half min added, each step rounded on its own.
#pragma GCC optimize("fp-contract=off")  // keep ggml's separately rounded product and sum even under -mfma

#include "quant/block_layouts_fallback.h"
#include "quant/half_bits.h"
#include "quant/kernels.h"
#include "quant/scalar_rows.h"

namespace ds4::quant_kernels {
namespace {

constexpr int kN = kLegacyBlockElems;

// The 5-bit quants' top bit: element j's is bit j of the little-endian qh.
inline int fifth_bit(const uint8_t* qh, int j) { return ((load_u32(qh) >> j) & 1) << 4; }

void decode(const BlockQ4_0& b, float* y) {
    const float d = half_bits_to_float(load_u16(b.d));
    for (int j = 0; j < kN / 2; ++j) {
        y[j] = static_cast<float>((b.qs[j] & 0xF) - 8) * d;
        y[j + kN / 2] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
    }
}

void decode(const BlockQ4_1& b, float* y) {
    const float d = half_bits_to_float(load_u16(b.d));
    const float m = half_bits_to_float(load_u16(b.m));
    for (int j = 0; j < kN / 2; ++j) {
        y[j] = static_cast<float>(b.qs[j] & 0xF) * d + m;
        y[j + kN / 2] = static_cast<float>(b.qs[j] >> 4) * d + m;
    }
}

void decode(const BlockQ5_0& b, float* y) {
    const float d = half_bits_to_float(load_u16(b.d));
    for (int j = 0; j < kN / 2; ++j) {
        y[j] = static_cast<float>(((b.qs[j] & 0xF) | fifth_bit(b.qh, j)) - 16) * d;
        y[j + kN / 2] = static_cast<float>(((b.qs[j] >> 4) | fifth_bit(b.qh, j + kN / 2)) - 16) * d;
    }
}

void decode(const BlockQ5_1& b, float* y) {
    const float d = half_bits_to_float(load_u16(b.d));
    const float m = half_bits_to_float(load_u16(b.m));
    for (int j = 0; j < kN / 2; ++j) {
        y[j] = static_cast<float>((b.qs[j] & 0xF) | fifth_bit(b.qh, j)) * d + m;
        y[j + kN / 2] = static_cast<float>((b.qs[j] >> 4) | fifth_bit(b.qh, j + kN / 2)) * d + m;
    }
}

template <class Block>
void dequantize_rows(const void* x, float* y, int64_t n) {
    dequantize_blocks<Block, kN>(x, y, n, [](const Block& b, float* out) { decode(b, out); });
}

template <class Block>
float dot_rows(const void* w, const float* x, int64_t n) {
    return dot_blocks<Block, kN>(w, x, n, [](const Block& b, float* out) { decode(b, out); });
}

}  // namespace

void dequantize_q4_0_scalar(const void* x, float* y, int64_t n) { dequantize_rows<BlockQ4_0>(x, y, n); }
float dot_q4_0_scalar(const void* w, const float* x, int64_t n) { return dot_rows<BlockQ4_0>(w, x, n); }
void dequantize_q4_1_scalar(const void* x, float* y, int64_t n) { dequantize_rows<BlockQ4_1>(x, y, n); }
float dot_q4_1_scalar(const void* w, const float* x, int64_t n) { return dot_rows<BlockQ4_1>(w, x, n); }
void dequantize_q5_0_scalar(const void* x, float* y, int64_t n) { dequantize_rows<BlockQ5_0>(x, y, n); }
float dot_q5_0_scalar(const void* w, const float* x, int64_t n) { return dot_rows<BlockQ5_0>(w, x, n); }
void dequantize_q5_1_scalar(const void* x, float* y, int64_t n) { dequantize_rows<BlockQ5_1>(x, y, n); }
float dot_q5_1_scalar(const void* w, const float* x, int64_t n) { return dot_rows<BlockQ5_1>(w, x, n); }

}  // namespace ds4::quant_kernels

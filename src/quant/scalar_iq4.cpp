// Scalar reference for the non-linear 4-bit formats IQ4_NL (blocks of 32, one
// half scale) and IQ4_XS (super-blocks of 256, eight 6-bit sub-block scales).
// A quant indexes the 16-entry grid kIq4nlValues; the decode is ggml's
// dequantize_row_iq4_*: scale (rounded to float first, for IQ4_XS) times the
// grid value.
#pragma GCC optimize("fp-contract=off")  // keep ggml's separately rounded products even under -mfma

#include "quant/block_layouts_fallback.h"
#include "quant/half_bits.h"
#include "quant/kernels.h"
#include "quant/scalar_rows.h"

namespace ds4::quant_kernels {
namespace {

void decode(const BlockIQ4NL& b, float* y) {
    const float d = half_bits_to_float(load_u16(b.d));
    for (int j = 0; j < 16; ++j) {
        y[j] = d * static_cast<float>(kIq4nlValues[b.qs[j] & 0xF]);
        y[j + 16] = d * static_cast<float>(kIq4nlValues[b.qs[j] >> 4]);
    }
}

void decode(const BlockIQ4XS& b, float* y) {
    const float d = half_bits_to_float(load_u16(b.d));
    for (int ib = 0; ib < 8; ++ib) {
        const float dl = d * static_cast<float>(iq4_xs_scale(b, ib));
        const uint8_t* qs = b.qs + 16 * ib;
        for (int j = 0; j < 16; ++j) {
            y[32 * ib + j] = dl * static_cast<float>(kIq4nlValues[qs[j] & 0xF]);
            y[32 * ib + j + 16] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
        }
    }
}

template <class Block, int kN>
void dequantize_rows(const void* x, float* y, int64_t n) {
    dequantize_blocks<Block, kN>(x, y, n, [](const Block& b, float* out) { decode(b, out); });
}

template <class Block, int kN>
float dot_rows(const void* w, const float* x, int64_t n) {
    return dot_blocks<Block, kN>(w, x, n, [](const Block& b, float* out) { decode(b, out); });
}

}  // namespace

void dequantize_iq4_nl_scalar(const void* x, float* y, int64_t n) {
    dequantize_rows<BlockIQ4NL, kLegacyBlockElems>(x, y, n);
}
float dot_iq4_nl_scalar(const void* w, const float* x, int64_t n) {
    return dot_rows<BlockIQ4NL, kLegacyBlockElems>(w, x, n);
}
void dequantize_iq4_xs_scalar(const void* x, float* y, int64_t n) {
    dequantize_rows<BlockIQ4XS, kSuperBlockElems>(x, y, n);
}
float dot_iq4_xs_scalar(const void* w, const float* x, int64_t n) {
    return dot_rows<BlockIQ4XS, kSuperBlockElems>(w, x, n);
}

}  // namespace ds4::quant_kernels

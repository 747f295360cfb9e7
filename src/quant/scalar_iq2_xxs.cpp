// Scalar reference for IQ2_XXS: each group of 8 weights is a codebook vector
// (kIq2xxsGrid) with signs, scaled by d * (0.5 + s) / 4 where s is the 4-bit
// scale of its 32-weight group. Rounded exactly as ggml's
// dequantize_row_iq2_xxs: db = (d * (0.5f + s)) * 0.25f, x = (db * grid) * sign.
#pragma GCC optimize("fp-contract=off")  // keep ggml's separately rounded products even under -mfma

#include "quant/block_layouts.h"
#include "quant/half_bits.h"
#include "quant/iq2_xxs_grid.h"
#include "quant/kernels.h"
#include "quant/scalar_rows.h"

namespace ds4::quant_kernels {
namespace {

constexpr int kN = kSuperBlockElems;

void decode(const BlockIQ2XXS& b, float* y) {
    const float d = half_bits_to_float(load_u16(b.d));
    for (int g = 0; g < 8; ++g) {
        const uint8_t* q = b.qs + 8 * g;
        const uint32_t codes = load_u32(q + 4);
        const float db = d * (0.5f + static_cast<float>(codes >> 28)) * 0.25f;
        for (int l = 0; l < 4; ++l) {
            const uint64_t grid = kIq2xxsGrid[q[l]];
            const uint8_t signs = iq2_sign_bits(codes >> (7 * l));
            for (int j = 0; j < 8; ++j) {
                const float v = db * static_cast<float>((grid >> (8 * j)) & 0xFF);
                y[j] = (signs >> j) & 1 ? -v : v;
            }
            y += 8;
        }
    }
}

}  // namespace

void dequantize_iq2_xxs_scalar(const void* x, float* y, int64_t n) {
    dequantize_blocks<BlockIQ2XXS, kN>(x, y, n, [](const BlockIQ2XXS& b, float* out) { decode(b, out); });
}

float dot_iq2_xxs_scalar(const void* w, const float* x, int64_t n) {
    return dot_blocks<BlockIQ2XXS, kN>(w, x, n, [](const BlockIQ2XXS& b, float* out) { decode(b, out); });
}

}  // namespace ds4::quant_kernels

// Scalar reference for Q3_K (super-blocks of 256, 16 sub-blocks of 16). The
// decode follows ggml's dequantize_row_q3_K: the sub-block factor d * (sc-32)
// is rounded to float first, then multiplied by the signed 3-bit quant.
#pragma GCC optimize("fp-contract=off")  // keep ggml's separately rounded products even under -mfma

#include "quant/block_layouts_fallback.h"
#include "quant/half_bits.h"
#include "quant/kernels.h"
#include "quant/scalar_rows.h"

namespace ds4::quant_kernels {
namespace {

constexpr int kN = kSuperBlockElems;

void decode(const BlockQ3K& b, float* y) {
    const float d = half_bits_to_float(load_u16(b.d));
    int8_t sc[16];
    q3_k_scales(b.scales, sc);
    int is = 0;
    for (int half = 0; half < 2; ++half) {               // 128 elements from 32 qs bytes
        const uint8_t* q = b.qs + 32 * half;
        for (int plane = 0; plane < 4; ++plane) {        // four 2-bit planes of 32 elements
            const int shift = 2 * plane;
            const uint8_t high = static_cast<uint8_t>(1u << (4 * half + plane));
            for (int part = 0; part < 2; ++part) {       // bytes 0..15, then 16..31: one sub-block each
                const float dl = d * static_cast<float>(sc[is++]);
                for (int l = 16 * part; l < 16 * part + 16; ++l) {
                    const int v = ((q[l] >> shift) & 3) - ((b.hmask[l] & high) ? 0 : 4);
                    *y++ = dl * static_cast<float>(v);
                }
            }
        }
    }
}

}  // namespace

void dequantize_q3_k_scalar(const void* x, float* y, int64_t n) {
    dequantize_blocks<BlockQ3K, kN>(x, y, n, [](const BlockQ3K& b, float* out) { decode(b, out); });
}

float dot_q3_k_scalar(const void* w, const float* x, int64_t n) {
    return dot_blocks<BlockQ3K, kN>(w, x, n, [](const BlockQ3K& b, float* out) { decode(b, out); });
}

}  // namespace ds4::quant_kernels

// Scalar reference for the K-quants Q2_K, Q4_K, Q5_K, Q6_K (super-blocks of
// 256). Each decode reproduces ggml's dequantize_row_* expression by
// expression, so the floats come out bit for bit the same: the products of
// the half scales with the small integer scales are rounded first, then the
// quant is multiplied and the min subtracted.
#pragma GCC optimize("fp-contract=off")  // keep ggml's separately rounded products even under -mfma

#include "quant/block_layouts.h"
#include "quant/half_bits.h"
#include "quant/kernels.h"
#include "quant/scalar_rows.h"

namespace ds4::quant_kernels {
namespace {

constexpr int kN = kSuperBlockElems;

void decode(const BlockQ2K& b, float* y) {
    const float d = half_bits_to_float(load_u16(b.d));
    const float dmin = half_bits_to_float(load_u16(b.dmin));
    const uint8_t* q = b.qs;
    int is = 0;
    for (int half = 0; half < 2; ++half) {      // 128 elements from 32 bytes
        for (int shift = 0; shift < 8; shift += 2) {  // four 2-bit planes
            for (int part = 0; part < 2; ++part) {    // bytes 0..15, then 16..31
                const uint8_t sc = b.scales[is++];
                const float dl = d * static_cast<float>(sc & 0xF);
                const float ml = dmin * static_cast<float>(sc >> 4);
                for (int l = 0; l < 16; ++l)
                    *y++ = dl * static_cast<float>((q[16 * part + l] >> shift) & 3) - ml;
            }
        }
        q += 32;
    }
}

void decode(const BlockQ4K& b, float* y) {
    const float d = half_bits_to_float(load_u16(b.d));
    const float dmin = half_bits_to_float(load_u16(b.dmin));
    const uint8_t* q = b.qs;
    for (int pair = 0; pair < 4; ++pair) {  // sub-blocks 2*pair (low nibbles), 2*pair+1 (high)
        uint8_t sc, m;
        k_scale_min(2 * pair, b.scales, sc, m);
        const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
        k_scale_min(2 * pair + 1, b.scales, sc, m);
        const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
        for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
        for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
        q += 32;
    }
}

void decode(const BlockQ5K& b, float* y) {
    const float d = half_bits_to_float(load_u16(b.d));
    const float dmin = half_bits_to_float(load_u16(b.dmin));
    const uint8_t* ql = b.qs;
    for (int pair = 0; pair < 4; ++pair) {
        uint8_t sc, m;
        k_scale_min(2 * pair, b.scales, sc, m);
        const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
        k_scale_min(2 * pair + 1, b.scales, sc, m);
        const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
        const uint8_t bit_lo = static_cast<uint8_t>(1u << (2 * pair));
        const uint8_t bit_hi = static_cast<uint8_t>(2u << (2 * pair));
        for (int l = 0; l < 32; ++l)
            *y++ = d1 * static_cast<float>((ql[l] & 0xF) + ((b.qh[l] & bit_lo) ? 16 : 0)) - m1;
        for (int l = 0; l < 32; ++l)
            *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((b.qh[l] & bit_hi) ? 16 : 0)) - m2;
        ql += 32;
    }
}

void decode(const BlockQ6K& b, float* y) {
    const float d = half_bits_to_float(load_u16(b.d));
    const uint8_t* ql = b.ql;
    const uint8_t* qh = b.qh;
    const int8_t* sc = b.scales;
    for (int half = 0; half < 2; ++half) {  // 128 elements from 64 ql bytes and 32 qh bytes
        for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
            y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
            y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
            y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
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

void dequantize_q2_k_scalar(const void* x, float* y, int64_t n) { dequantize_rows<BlockQ2K>(x, y, n); }
float dot_q2_k_scalar(const void* w, const float* x, int64_t n) { return dot_rows<BlockQ2K>(w, x, n); }
void dequantize_q4_k_scalar(const void* x, float* y, int64_t n) { dequantize_rows<BlockQ4K>(x, y, n); }
float dot_q4_k_scalar(const void* w, const float* x, int64_t n) { return dot_rows<BlockQ4K>(w, x, n); }
void dequantize_q5_k_scalar(const void* x, float* y, int64_t n) { dequantize_rows<BlockQ5K>(x, y, n); }
float dot_q5_k_scalar(const void* w, const float* x, int64_t n) { return dot_rows<BlockQ5K>(w, x, n); }
void dequantize_q6_k_scalar(const void* x, float* y, int64_t n) { dequantize_rows<BlockQ6K>(x, y, n); }
float dot_q6_k_scalar(const void* w, const float* x, int64_t n) { return dot_rows<BlockQ6K>(w, x, n); }

}  // namespace ds4::quant_kernels

// Byte layouts (ggml-common.h) of the block formats llama-quantize falls
// back to inside its K-quant mixes: the legacy 32-element formats Q4_0,
// Q4_1, Q5_0, Q5_1 (tensors whose rows are not a multiple of 256, and some
// Q4_K_M / Q2_K picks), Q3_K (Q2_K and Q3_K_M mixes) and the non-linear
// IQ4_NL / IQ4_XS. Byte arrays only, so a block may sit at any address.
//
// Internal header of quant/; helpers have internal linkage (see half_bits.h).
#pragma once

#include <cstdint>

#include "quant/block_layouts.h"

namespace ds4 {
namespace {

constexpr int kLegacyBlockElems = 32;  // QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK4_NL

// Q4_0: x = d * (q - 8); byte j holds element j (low nibble) and j+16 (high).
struct BlockQ4_0 {
    uint8_t d[2];
    uint8_t qs[16];
};

// Q4_1: x = d * q + m, q in 0..15, nibbles as in Q4_0.
struct BlockQ4_1 {
    uint8_t d[2];
    uint8_t m[2];
    uint8_t qs[16];
};

// Q5_0: x = d * (q - 16); bit j of the little-endian uint32 qh is the fifth
// bit of element j (so bits 16..31 belong to the high-nibble elements).
struct BlockQ5_0 {
    uint8_t d[2];
    uint8_t qh[4];
    uint8_t qs[16];
};

// Q5_1: x = d * q + m, q in 0..31, bits as in Q5_0.
struct BlockQ5_1 {
    uint8_t d[2];
    uint8_t m[2];
    uint8_t qh[4];
    uint8_t qs[16];
};

// IQ4_NL: x = d * kIq4nlValues[q], nibbles as in Q4_0.
struct BlockIQ4NL {
    uint8_t d[2];
    uint8_t qs[16];
};

// Q3_K: 16 sub-blocks of 16; x = (d * (sc - 32)) * (q - (high bit ? 0 : 4)),
// q the low two bits in 0..3, sc a 6-bit scale (see q3_k_scales).
// qs is laid out as Q2_K's: 32 bytes per 128 elements, four 2-bit planes of
// 32 elements each; hmask[l] bit (4*half + plane) is the high bit of the
// element that byte l of that half's plane holds.
struct BlockQ3K {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12];
    uint8_t d[2];
};

// IQ4_XS: 8 sub-blocks of 32; x = (d * (ls - 32)) * kIq4nlValues[q], ls a
// 6-bit scale: low nibble from scales_l, top two bits from scales_h.
// Each sub-block's 16 qs bytes hold its elements l (low) and l+16 (high).
struct BlockIQ4XS {
    uint8_t d[2];
    uint8_t scales_h[2];
    uint8_t scales_l[4];
    uint8_t qs[128];
};

static_assert(sizeof(BlockQ4_0) == 18 && alignof(BlockQ4_0) == 1);
static_assert(sizeof(BlockQ4_1) == 20 && alignof(BlockQ4_1) == 1);
static_assert(sizeof(BlockQ5_0) == 22 && alignof(BlockQ5_0) == 1);
static_assert(sizeof(BlockQ5_1) == 24 && alignof(BlockQ5_1) == 1);
static_assert(sizeof(BlockIQ4NL) == 18 && alignof(BlockIQ4NL) == 1);
static_assert(sizeof(BlockQ3K) == 110 && alignof(BlockQ3K) == 1);
static_assert(sizeof(BlockIQ4XS) == 136 && alignof(BlockIQ4XS) == 1);

// The 16 code points of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl): a
// non-uniform grid, denser near zero, which the formats are defined by.
constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// The 16 six-bit scales of a Q3_K block, unbiased (sc - 32, in -32..31).
// Scale i takes its low nibble from byte i (i < 8, low nibble) or byte i-8
// (high nibble), and its top two bits from byte 8 + i%4, bits 2*(i/4).
inline void q3_k_scales(const uint8_t* s, int8_t (&out)[16]) {
    for (int i = 0; i < 16; ++i) {
        const int lo = i < 8 ? (s[i] & 0xF) : (s[i - 8] >> 4);
        const int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        out[i] = static_cast<int8_t>((lo | (hi << 4)) - 32);
    }
}

// The 6-bit scale of IQ4_XS sub-block ib (0..7), unbiased (ls - 32).
inline int iq4_xs_scale(const BlockIQ4XS& b, int ib) {
    const int lo = (b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF;
    const int hi = (load_u16(b.scales_h) >> (2 * ib)) & 3;
    return (lo | (hi << 4)) - 32;
}

}  // namespace
}  // namespace ds4

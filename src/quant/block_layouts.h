// Byte layouts of ggml's block formats (ggml-common.h), spelled with byte
// arrays only so that a block may sit at any address: a row pointer into a
// mapped GGUF file carries no alignment promise. Half-precision fields are
// little-endian binary16.
//
// Internal header of quant/; helpers have internal linkage (see half_bits.h).
#pragma once

#include <bit>
#include <cstdint>

namespace ds4 {
namespace {

static_assert(std::endian::native == std::endian::little,
              "ggml block formats are little-endian; ds4 reads them in place");

constexpr int kQ8_0BlockElems = 32;
constexpr int kSuperBlockElems = 256;  // QK_K of the K-quants and i-quants

// Q8_0: x = d * q, 32 signed bytes per block.
struct BlockQ8_0 {
    uint8_t d[2];
    int8_t qs[32];
};

// Q2_K: 16 sub-blocks of 16; x = d * (sc & 15) * q - dmin * (sc >> 4), q in 0..3.
struct BlockQ2K {
    uint8_t scales[16];  // low nibble: scale, high nibble: min
    uint8_t qs[64];      // 2-bit quants, four 32-element planes per 128 elements
    uint8_t d[2];
    uint8_t dmin[2];
};

// Q4_K: 8 sub-blocks of 32; x = d * sc * q - dmin * m, 6-bit sc and m, q in 0..15.
struct BlockQ4K {
    uint8_t d[2];
    uint8_t dmin[2];
    uint8_t scales[12];  // 8 scales and 8 mins of 6 bits, packed (see k_scale_min)
    uint8_t qs[128];     // low nibbles: sub-block 2j, high nibbles: sub-block 2j+1
};

// Q5_K: as Q4_K plus a fifth bit per quant in qh (q in 0..31).
struct BlockQ5K {
    uint8_t d[2];
    uint8_t dmin[2];
    uint8_t scales[12];
    uint8_t qh[32];   // bit 2j / 2j+1 of qh[l] is the high bit of element l of sub-block 2j / 2j+1
    uint8_t qs[128];
};

// Q6_K: 16 sub-blocks of 16; x = d * sc * (q - 32), 8-bit signed sc, q in 0..63.
struct BlockQ6K {
    uint8_t ql[128];  // low 4 bits
    uint8_t qh[64];   // high 2 bits
    int8_t scales[16];
    uint8_t d[2];
};

// IQ2_XXS: 8 groups of 32; each group is two little-endian uint32: four
// 8-bit grid indices, then four 7-bit sign indices and a 4-bit scale on top.
struct BlockIQ2XXS {
    uint8_t d[2];
    uint8_t qs[64];
};

static_assert(sizeof(BlockQ8_0) == 34 && alignof(BlockQ8_0) == 1);
static_assert(sizeof(BlockQ2K) == 84 && alignof(BlockQ2K) == 1);
static_assert(sizeof(BlockQ4K) == 144 && alignof(BlockQ4K) == 1);
static_assert(sizeof(BlockQ5K) == 176 && alignof(BlockQ5K) == 1);
static_assert(sizeof(BlockQ6K) == 210 && alignof(BlockQ6K) == 1);
static_assert(sizeof(BlockIQ2XXS) == 66 && alignof(BlockIQ2XXS) == 1);

inline uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

inline uint32_t load_u32(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
           (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// Scale and min of sub-block j (0..7) of Q4_K/Q5_K: the first four pairs are
// the low 6 bits of bytes 0..3 and 4..7; the last four take their low nibbles
// from bytes 8..11 and their top two bits from the spare bits of bytes 0..7.
inline void k_scale_min(int j, const uint8_t* q, uint8_t& sc, uint8_t& m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

}  // namespace
}  // namespace ds4

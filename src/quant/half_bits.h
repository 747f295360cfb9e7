// Exact bit-level conversions between float32 and the 16-bit float formats,
// matching ggml's software conversions bit for bit (subnormals, inf, NaN).
//
// Internal header of quant/. The functions have internal linkage on purpose:
// the avx2_*.cpp files are compiled with -mavx2 -mfma, and an inline function
// with external linkage would be one COMDAT copy shared by every translation
// unit; the linker could then hand the AVX2-compiled copy to the scalar path
// (an illegal instruction on an older CPU, or an FMA-contracted result).
#pragma once

#include <bit>
#include <cstdint>

namespace ds4 {
namespace {

// IEEE binary16 -> binary32. Every half is exactly representable; a NaN keeps
// its payload and comes back quiet (as ggml's multiply-based conversion does).
constexpr float half_bits_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1Fu;
    const uint32_t mant = h & 0x3FFu;
    uint32_t bits;
    if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (mant << 13) | (mant != 0 ? 0x00400000u : 0u);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (mant << 13);  // rebias 15 -> 127
    } else if (mant == 0) {
        bits = sign;
    } else {
        // Subnormal half: mant * 2^-24 is a normal float; put the leading bit
        // of mant into the implicit position.
        const int top = 31 - std::countl_zero(mant);  // 0..9
        bits = sign | (static_cast<uint32_t>(top + 103) << 23) | ((mant << (23 - top)) & 0x7FFFFFu);
    }
    return std::bit_cast<float>(bits);
}

// binary32 -> binary16, round to nearest even. NaN becomes sign|0x7E00 (the
// payload is dropped, as in ggml_compute_fp32_to_fp16); overflow gives inf.
constexpr uint16_t float_to_half_bits(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return sign | 0x7E00u;
    if (ax >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520 rounds to inf
    if (ax >= 0x38800000u) {                        // normal half (>= 2^-14)
        // Round the 13 dropped mantissa bits to nearest even; a carry runs
        // into the exponent, which is what rounding up to the next binade means.
        const uint32_t rounded = ax + 0xFFFu + ((ax >> 13) & 1u);
        return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
    }
    const uint32_t e = ax >> 23;
    if (e == 0) return sign;  // float subnormal: far below half's smallest step
    // Result in units of 2^-24: m * 2^(e-150) / 2^-24 = m >> (126 - e).
    const uint32_t m = (ax & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - e;  // >= 14
    if (shift > 24) return sign;      // below 2^-25: rounds to zero
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;  // q == 0x400 is the smallest normal: still right
    return sign | static_cast<uint16_t>(q);
}

constexpr float bf16_bits_to_float(uint16_t h) {
    return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

// binary32 -> bfloat16, round to nearest even, NaN forced quiet; subnormals
// kept (ggml_compute_fp32_to_bf16).
constexpr uint16_t float_to_bf16_bits(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 64u);
    return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace
}  // namespace ds4

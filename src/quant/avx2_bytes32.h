// AVX2 helpers for formats whose quants are unpacked 32 at a time into bytes
// (Q4_0/Q4_1/Q5_0/Q5_1, IQ4_NL/IQ4_XS, Q3_K): byte i of a __m256i is the
// quant of element i. Include only from avx2_*.cpp files; internal linkage.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace ds4 {
namespace {

// 16 bytes of nibble pairs, as ggml packs a 32-element group: byte j holds
// element j in its low nibble and element j+16 in its high nibble.
inline __m256i nibbles_32(const uint8_t* qs) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m128i lo = _mm_and_si128(v, _mm_set1_epi8(0xF));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0xF));
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

// Byte i is 0x10 when bit i of `bits` is set, else 0 (the fifth bit of Q5_0/Q5_1).
inline __m256i bits_to_0x10_bytes(uint32_t bits) {
    // Byte i receives byte i/8 of bits (shuffles stay within 128-bit lanes,
    // and set1 repeats all four bytes in both), then is tested against bit i%8.
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int>(bits)),
        _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// 32 signed bytes as four vectors of eight floats (elements 0-7, 8-15, 16-23, 24-31).
inline void i8x32_to_ps(__m256i v, __m256 (&f)[4]) {
    const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
    f[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
    f[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)));
    f[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
    f[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)));
}

// sum over 16 elements of f[k] * x[8k..], k = first, first+1, in float.
inline __m256 dot16(const __m256 (&f)[4], int first, const float* x) {
    return _mm256_fmadd_ps(f[first + 1], _mm256_loadu_ps(x + 8), _mm256_mul_ps(f[first], _mm256_loadu_ps(x)));
}

}  // namespace
}  // namespace ds4

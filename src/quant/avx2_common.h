// Small AVX2 helpers shared by the avx2_*.cpp kernels. Include only from
// files compiled with -mavx2 -mfma -mf16c; everything here has internal
// linkage so no AVX2-compiled copy can leak to the scalar path.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace ds4 {
namespace {

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// Long rows are summed in float within a block (or a short run of blocks)
// and in double across them: the error then stays near one float rounding of
// a block's partial sum, however long the row is.
inline __m256d add_to_double(__m256d acc, __m256 v) {
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

inline double hsum(__m256d v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

// Eight consecutive bytes, zero- or sign-extended to eight 32-bit lanes.
inline __m256i u8x8_to_epi32(const uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline __m256i i8x8_to_epi32(const int8_t* p) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

inline float half_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

}  // namespace
}  // namespace ds4

// Activations as three int8 digits: the exact (float-grade) int8 decode path.
//
// Why: the float decode products spend ~4-5 instructions per weight (extract,
// convert, FMA, scales) and the routed-expert kernels of a batch are bound
// by that issue rate far under HBM speed (bench/RESULTS.md, issue 9). __dp4a
// multiplies four 8-bit weights by four 8-bit activations in one
// instruction, but rounding activations to 8 bits (--int8-activations, as
// llama.cpp) moves logits by ~1 %. Here each activation of a 32-element
// block is a 24-bit integer A = rint(x / u), u = amax / kSplitScale, written
// in balanced base 254 as A = (a0 * 254 + a1) * 254 + a2 with every digit in
// [-127, 127]. A weight block's integer dot with A is three __dp4a sums
// recombined in int32, exactly; the only roundings are A itself (within a
// unit of amax / 8.2e6, the order of a float's own rounding of x) and the
// float arithmetic of the scales. So the products stay within the suite's
// FP32 bound against the CPU backend while the inner loop costs ~1-2
// instructions per weight.
//
// Integer range: |A| <= kSplitScale = 127 * 254^2 - 32640, so |a0| <= 126
// after the balanced lower digits; a dot of 16 weights of magnitude <= 15
// (a lane's share of a Q4_K sub-block) with such A stays under 2^31, and so
// do the partial recombinations.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define DS4_SPLIT_HD __host__ __device__ __forceinline__
#else
#define DS4_SPLIT_HD inline
#endif

namespace ds4::cuda {

constexpr int32_t kSplitBase = 254;
constexpr float kSplitScale = 127.0f * 254.0f * 254.0f - 32640.0f;  // 8,160,892: exact in float

// The digits of A (|A| <= kSplitScale): a0 most significant.
struct SplitDigits {
    int32_t a0, a1, a2;
};
DS4_SPLIT_HD SplitDigits split_digits(int32_t a) {
    // Balanced remainder in [-127, 126]: C's % keeps the sign of a.
    auto digit = [](int32_t v) {
        int32_t r = v % kSplitBase;
        if (r > 126) r -= kSplitBase;
        if (r < -127) r += kSplitBase;
        return r;
    };
    const int32_t a2 = digit(a);
    const int32_t b = (a - a2) / kSplitBase;
    const int32_t a1 = digit(b);
    return {(b - a1) / kSplitBase, a1, a2};
}
DS4_SPLIT_HD int32_t split_join(int32_t d0, int32_t d1, int32_t d2) {
    return (d0 * kSplitBase + d1) * kSplitBase + d2;
}
// A = rint(x * inv_u) with inv_u = kSplitScale / amax (0 for an all-zero block).
DS4_SPLIT_HD int32_t split_value(float x, float inv_u) { return int32_t(rintf(x * inv_u)); }

// A split activation row of k values (k % 256 == 0): the digit planes a0[k],
// a1[k], a2[k] (int8), then k / 32 float block units u, then k / 16 float
// sums of the original values per 16 (the Q4_K min term). 16-byte aligned.
DS4_SPLIT_HD int64_t split_row_bytes(int64_t k) { return 3 * k + 4 * (k / 32) + 4 * (k / 16); }

}  // namespace ds4::cuda

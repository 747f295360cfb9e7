// Shared helpers of the CUDA backend tests: the GPU check, fresh seeds,
// random inputs and the relative-error measure used against the CPU backend.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "support/test_seed.h"

// Issue 4: CI has no GPU but builds these tests; they say so and stop.
#define DS4_REQUIRE_CUDA_DEVICE()                                                    \
    do {                                                                             \
        if (ds4::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";       \
    } while (0)

namespace ds4::cudatest {

// A new seed every run, or DS4_TEST_SEED (tests/support/test_seed.h).
inline uint64_t fresh_seed() { return ds4::test::test_seed(); }

inline std::vector<float> random_floats(std::mt19937_64& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

// ||a - b|| / ||b|| (0 when both are zero).
inline double rel_l2(const float* a, const float* b, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; ++i) {
        num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        den += double(b[i]) * b[i];
    }
    if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
    return std::sqrt(num / den);
}

}  // namespace ds4::cudatest

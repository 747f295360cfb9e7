// The split activation digits (src/backend/cuda/split_digits.h) on the host:
// the CUDA kernels' integer arithmetic rests on these identities and bounds,
// and the device tests compare whole products only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "backend/cuda/split_digits.h"

namespace ds4::cuda {
namespace {

std::mt19937_64 seeded_rng() {
    const uint64_t seed = std::random_device{}();
    std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
    return std::mt19937_64(seed);
}

void expect_digits(int32_t a) {
    const SplitDigits d = split_digits(a);
    EXPECT_EQ(split_join(d.a0, d.a1, d.a2), a) << a;
    EXPECT_LE(std::abs(d.a0), 126) << a;
    EXPECT_LE(std::abs(d.a1), 127) << a;
    EXPECT_LE(std::abs(d.a2), 127) << a;
}

TEST(SplitDigits, EveryValueInRangeIsThreeInt8DigitsThatJoinBack) {
    const int32_t top = int32_t(kSplitScale);
    for (int32_t a : {0, 1, -1, 126, 127, -127, 128, -128, 253, 254, -254, 32385, -32385, 64516, -64516, top, -top,
                      top + 1, -top - 1})
        expect_digits(a);
    auto rng = seeded_rng();
    std::uniform_int_distribution<int32_t> any(-top - 1, top + 1);
    for (int i = 0; i < 200000; ++i) expect_digits(any(rng));
}

// A * u is x to within one unit u (amax / 8.2e6): half a unit from rint, the
// rest from the float roundings of x * inv and of u itself.
TEST(SplitDigits, RoundedValuesStayInRangeAndWithinAUnit) {
    auto rng = seeded_rng();
    std::uniform_real_distribution<float> mag(-30.0f, 30.0f), one(-1.0f, 1.0f);
    for (int i = 0; i < 20000; ++i) {
        float x[32], amax = 0.0f;
        const float scale = std::ldexp(1.0f, int(mag(rng)));
        for (float& v : x) {
            v = one(rng) * scale;
            amax = std::max(amax, std::fabs(v));
        }
        x[i % 32] = (i & 1) ? amax : -amax;  // the block's extreme itself
        const float inv = kSplitScale / amax, u = amax / kSplitScale;
        for (float v : x) {
            const int32_t a = split_value(v, inv);
            ASSERT_LE(std::abs(a), int32_t(kSplitScale) + 1) << v << " of amax " << amax;
            expect_digits(a);
            EXPECT_LE(std::fabs(double(a) * u - v), double(u) + 1.2e-7 * std::fabs(v)) << v << " of amax " << amax;
        }
    }
}

// The kernels add three int32 __dp4a sums per group (a lane's 16 Q4_K
// weights of 0..15) and join them in int32: the result must be the exact
// integer dot for the extreme activations too.
TEST(SplitDigits, IntegerDotsOfWeightGroupsFitInt32) {
    auto rng = seeded_rng();
    const int32_t top = int32_t(kSplitScale) + 1;
    std::uniform_int_distribution<int32_t> any(-top, top), pick(0, 3);
    auto group_dot = [&](int n, int lo, int hi) {
        std::uniform_int_distribution<int> q(lo, hi);
        int32_t d0 = 0, d1 = 0, d2 = 0;
        int64_t exact = 0;
        for (int e = 0; e < n; ++e) {
            const int w = pick(rng) == 0 ? q(rng) : (pick(rng) & 1 ? lo : hi);  // extremes often
            const int c = pick(rng);
            const int32_t a = c == 0 ? top : c == 1 ? -top : any(rng);
            const SplitDigits d = split_digits(a);
            d0 += w * d.a0;
            d1 += w * d.a1;
            d2 += w * d.a2;
            exact += int64_t(w) * a;
        }
        ASSERT_LT(std::abs(exact), int64_t(INT32_MAX));
        EXPECT_EQ(int64_t(split_join(d0, d1, d2)), exact);
    };
    for (int i = 0; i < 100000; ++i) {
        group_dot(16, 0, 15);  // Q4_K: a lane's 16 nibbles of one sub-block
    }
}

TEST(SplitDigits, RowLayoutIsSixteenByteAligned) {
    for (int64_t k = 256; k <= 65536; k += 256) EXPECT_EQ(split_row_bytes(k) % 16, 0) << k;
}

}  // namespace
}  // namespace ds4::cuda

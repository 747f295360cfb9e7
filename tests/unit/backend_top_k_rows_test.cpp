// The CPU backend's top_k_rows (the reference the CUDA op is held to, bit for
// bit) against the plain way: a stable sort of the whole row by value, so
// equal values keep the lower column first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/error.h"
#include "support/test_seed.h"

namespace {

struct Reference {
    std::vector<int32_t> ids;
    std::vector<float> values;
    int32_t first_bad = -1;
};

Reference plain_top_k(const float* row, int64_t cols, int k) {
    Reference r;
    for (int64_t i = 0; i < cols && r.first_bad < 0; ++i)
        if (std::isnan(row[i]) || row[i] == INFINITY) r.first_bad = int32_t(i);
    std::vector<int32_t> order(static_cast<size_t>(cols));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    for (int j = 0; j < k; ++j) {
        r.ids.push_back(order[size_t(j)]);
        r.values.push_back(row[order[size_t(j)]]);
    }
    return r;
}

TEST(BackendTopKRows, EqualsAStableSortOfTheRow) {
    const uint64_t seed = ds4::test::test_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    auto be = ds4::make_cpu_backend(2);
    std::uniform_int_distribution<int64_t> cols_of(1, 3000);
    std::uniform_int_distribution<int> shape_of(0, 3), level(0, 5);
    std::normal_distribution<float> normal(0.0f, 4.0f);
    for (int round = 0; round < 60; ++round) {
        const int64_t rows = 1 + round % 7, cols = cols_of(rng);
        const int k = int(std::uniform_int_distribution<int64_t>(1, std::min<int64_t>(cols, ds4::Backend::kMaxTopK))(rng));
        const int shape = shape_of(rng);  // 0 normal, 1 few levels (ties), 2 banned -inf, 3 signed zeros
        std::vector<float> v(size_t(rows * cols));
        for (float& x : v) {
            x = shape == 1 ? float(level(rng)) : normal(rng);
            if (shape == 2 && level(rng) < 4) x = -INFINITY;
            if (shape == 3) x = level(rng) % 2 ? 0.0f : -0.0f;
        }
        ds4::Tensor x = be->alloc(rows, cols), values = be->alloc(rows, k);
        be->upload(x, v.data());
        ds4::IntArray ids = be->alloc_ints(rows * k), bad = be->alloc_ints(rows);
        be->top_k_rows(x, k, values, ids, bad);
        for (int64_t t = 0; t < rows; ++t) {
            const Reference want = plain_top_k(v.data() + t * cols, cols, k);
            SCOPED_TRACE("round " + std::to_string(round) + ", row " + std::to_string(t) + " of " +
                         std::to_string(cols) + " values, k " + std::to_string(k) + ", shape " + std::to_string(shape));
            EXPECT_EQ(bad.data[t], -1);
            ASSERT_EQ(std::vector<int32_t>(ids.data + t * k, ids.data + (t + 1) * k), want.ids);
            for (int j = 0; j < k; ++j)  // bit for bit: a -0 stays -0
                ASSERT_EQ(std::memcmp(&values.data[t * k + j], &want.values[size_t(j)], sizeof(float)), 0);
        }
    }
}

TEST(BackendTopKRows, FlagsTheFirstNanOrPlusInfinity) {
    auto be = ds4::make_cpu_backend(1);
    const std::vector<float> v = {1, 2, -INFINITY, 3, NAN, INFINITY, 0, 5, 4, INFINITY, NAN, 1};
    ds4::Tensor x = be->alloc(3, 4), values = be->alloc(3, 2);
    be->upload(x, v.data());
    ds4::IntArray ids = be->alloc_ints(6), bad = be->alloc_ints(3);
    be->top_k_rows(x, 2, values, ids, bad);
    EXPECT_EQ(bad.data[0], -1);
    EXPECT_EQ(bad.data[1], 0);  // row 1 = {NaN, +inf, 0, 5}
    EXPECT_EQ(bad.data[2], 1);  // row 2 = {4, +inf, NaN, 1}
    EXPECT_EQ(ids.data[0], 3);
    EXPECT_EQ(ids.data[1], 1);
}

TEST(BackendTopKRows, RefusesKOutsideTheRowOrTheLimit) {
    auto be = ds4::make_cpu_backend(1);
    ds4::Tensor x = be->alloc(2, 200), small = be->alloc(2, 5);
    ds4::IntArray ids = be->alloc_ints(2 * 200), bad = be->alloc_ints(2);
    for (int k : {0, -1, 129, 201}) {
        ds4::Tensor values = be->alloc(2, std::max(1, k));
        EXPECT_THROW(be->top_k_rows(x, k, values, ids, bad), ds4::Error) << k;
    }
    ds4::Tensor values = be->alloc(2, 6);
    EXPECT_THROW(be->top_k_rows(small, 6, values, ids, bad), ds4::Error);
    ds4::Tensor wrong = be->alloc(3, 4);
    EXPECT_THROW(be->top_k_rows(x, 4, wrong, ids, bad), ds4::Error);
}

}  // namespace

// CpuBackend::watch_selection_margins: what the GPU tests use to redraw an
// input whose reference choice was left to rounding (support/clear_choices.h).
// Each routing and indexer op must report, per row, (k-th - (k+1)-th) /
// max |score| of the scores it chose by, computed here the plain way (a full
// sort in double) from scores drawn at random, with exact ties planted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The margin of choosing the k best of `s` (scores as the op computes them).
double plain_margin(std::vector<float> s, int k) {
    if (k >= int(s.size())) return kInf;
    double scale = 0;
    for (float v : s)
        if (std::isfinite(v)) scale = std::max(scale, std::fabs(double(v)));
    std::sort(s.begin(), s.end(), std::greater<float>());
    if (!std::isfinite(s[size_t(k)])) return kInf;
    return scale > 0 ? (double(s[size_t(k - 1)]) - s[size_t(k)]) / scale : 0.0;
}

class SelectionMargins : public ::testing::Test {
protected:
    void SetUp() override {
        seed_ = ds4::test::test_seed();
        rng_.seed(seed_);
    }
    Tensor tensor(const std::vector<float>& v, int64_t rows) {
        Tensor t = cpu_.alloc(rows, int64_t(v.size()) / rows);
        cpu_.upload(t, v.data());
        return t;
    }
    std::vector<float> draw(size_t n, float lo, float hi) {
        std::uniform_real_distribution<float> d(lo, hi);
        std::vector<float> v(n);
        for (auto& x : v) x = d(rng_);
        return v;
    }
    uint64_t seed_ = 0;
    std::mt19937_64 rng_;
    CpuBackend cpu_{2};
};

// Qwen3's softmax routing: the margin is taken on the probabilities.
TEST_F(SelectionMargins, SoftmaxRoutingReportsEachRowsMargin) {
    SCOPED_TRACE(ds4::test::seed_note(seed_));
    const int64_t rows = 5, n_exp = 16;
    const int k = 4;
    auto l = draw(size_t(rows * n_exp), -3, 3);
    l[size_t(2 * n_exp + 3)] = l[size_t(2 * n_exp + 9)] = 5.0f;  // row 2: 4th and 5th tie
    l[size_t(2 * n_exp + 1)] = l[size_t(2 * n_exp + 5)] = l[size_t(2 * n_exp + 7)] = 6.0f;
    std::vector<double> m;
    cpu_.watch_selection_margins(&m);
    cpu_.route_softmax_topk(tensor(l, rows), k, true, 1.0f);
    cpu_.watch_selection_margins(nullptr);
    ASSERT_EQ(m.size(), size_t(rows));
    for (int64_t t = 0; t < rows; ++t) {
        std::vector<float> p(l.begin() + t * n_exp, l.begin() + (t + 1) * n_exp);
        const float mx = *std::max_element(p.begin(), p.end());
        double sum = 0;
        for (auto& x : p) sum += (x = std::exp(x - mx));
        for (auto& x : p) x = float(x / sum);
        EXPECT_NEAR(m[size_t(t)], plain_margin(p, k), 1e-6) << "row " << t;
    }
    EXPECT_EQ(m[2], 0.0) << "a tie at the k-th choice";
}

// DeepSeek V4's biased sqrt-softplus routing: chosen by score + bias, and the
// margin by that too; a hash-routed layer makes no choice.
TEST_F(SelectionMargins, BiasedAndHashRoutingOfDeepSeekV4) {
    SCOPED_TRACE(ds4::test::seed_note(seed_));
    const int64_t rows = 3, n_exp = 12;
    const int k = 3;
    const auto l = draw(size_t(rows * n_exp), -4, 4);
    std::vector<double> m;
    cpu_.watch_selection_margins(&m);
    cpu_.route_sqrt_softplus(tensor(l, rows), nullptr, nullptr, nullptr, k, true, 1.0f);
    cpu_.watch_selection_margins(nullptr);
    ASSERT_EQ(m.size(), size_t(rows));
    for (int64_t t = 0; t < rows; ++t) {
        std::vector<float> s(l.begin() + t * n_exp, l.begin() + (t + 1) * n_exp);
        for (auto& x : s) x = std::sqrt(x > 20.0f ? x : std::log(1.0f + std::exp(x)));
        EXPECT_NEAR(m[size_t(t)], plain_margin(s, k), 1e-6) << "row " << t;
    }
}

// GLM-5's grouped sigmoid routing: the group choice and the expert choice
// inside the kept groups each lower the row's margin; a second op on the
// same rows keeps the smaller of the two.
TEST_F(SelectionMargins, GroupedRoutingTakesTheSmallerOfItsTwoChoices) {
    SCOPED_TRACE(ds4::test::seed_note(seed_));
    const int64_t n_exp = 8;
    // Groups {0,1} {2,3} {4,5} {6,7}; 2 groups kept, 2 experts chosen.
    // Sigmoid scores: group sums decide the groups (the 2nd and 3rd best
    // 1.2e-2 apart), then experts by score (4.7e-2 apart): the row's margin
    // is the group choice's.
    const std::vector<float> l{3.0f, -0.2f, 2.0f, 0.5f, -2.0f, -2.5f, 1.0f, 0.8f};
    std::vector<float> s(l.size());
    for (size_t i = 0; i < l.size(); ++i) s[i] = 1.0f / (1.0f + std::exp(-l[i]));
    std::vector<float> groups{s[0] + s[1], s[2] + s[3], s[4] + s[5], s[6] + s[7]};
    const double group_margin = plain_margin(groups, 2);
    // Kept groups are the best two; experts outside them cannot be chosen.
    std::vector<int> order{0, 1, 2, 3};
    std::sort(order.begin(), order.end(), [&](int a, int b) { return groups[size_t(a)] > groups[size_t(b)]; });
    std::vector<float> kept(s.size(), -INFINITY);
    for (int g : {order[0], order[1]}) kept[size_t(2 * g)] = s[size_t(2 * g)], kept[size_t(2 * g + 1)] = s[size_t(2 * g + 1)];
    const double expert_margin = plain_margin(kept, 2);
    std::vector<double> m;
    cpu_.watch_selection_margins(&m);
    cpu_.route_sigmoid(tensor(l, 1), nullptr, 2, 4, 2, true, 1.0f);
    ASSERT_EQ(m.size(), 1u);
    EXPECT_LT(group_margin, expert_margin);
    EXPECT_NEAR(m[0], group_margin, 1e-7);
    // A second choice on the same row with a planted tie: the row keeps 0.
    std::vector<float> tie(size_t(n_exp), -1.0f);
    tie[0] = 2.0f;
    tie[1] = 1.0f;
    tie[5] = 1.0f;
    cpu_.route_sigmoid(tensor(tie, 1), nullptr, 2, 1, 1, true, 1.0f);
    cpu_.watch_selection_margins(nullptr);
    EXPECT_EQ(m[0], 0.0);
}

// The indexer (DeepSeek V4 and GLM-5): scores sum_h w[h] * relu(q_h . key);
// a set no larger than top_k is no choice.
TEST_F(SelectionMargins, IndexerChoosesKeysByScore) {
    SCOPED_TRACE(ds4::test::seed_note(seed_));
    const int64_t H = 2, D = 4, n_keys = 9, T = 3, top_k = 4;
    const auto q = draw(size_t(T * H * D), -1, 1), w = draw(size_t(T * H), 0.1f, 1), keys = draw(size_t(n_keys * D), -1, 1);
    RowSets visible;
    visible.cap = n_keys;
    visible.count = cpu_.alloc_ints(T);
    visible.base = cpu_.alloc_ints(T);
    const int32_t counts[T] = {9, 4, 7};  // row 1 sees exactly top_k keys: no choice
    for (int64_t t = 0; t < T; ++t) visible.count.data[t] = counts[t], visible.base.data[t] = 0;
    std::vector<double> m;
    cpu_.watch_selection_margins(&m);
    cpu_.indexer_topk(tensor(q, T), tensor(w, T), tensor(keys, n_keys), visible, top_k);
    cpu_.watch_selection_margins(nullptr);
    ASSERT_EQ(m.size(), size_t(T));
    for (int64_t t = 0; t < T; ++t) {
        std::vector<float> s(static_cast<size_t>(counts[t]));
        for (int64_t j = 0; j < counts[t]; ++j) {
            float acc = 0;
            for (int64_t h = 0; h < H; ++h) {
                float dot = 0;
                for (int64_t d = 0; d < D; ++d) dot += q[size_t(t * H * D + h * D + d)] * keys[size_t(j * D + d)];
                acc += std::max(dot, 0.0f) * w[size_t(t * H + h)];
            }
            s[size_t(j)] = acc;
        }
        const double want = plain_margin(s, int(top_k));
        if (std::isinf(want)) EXPECT_EQ(m[size_t(t)], want) << "row " << t;
        else EXPECT_NEAR(m[size_t(t)], want, 1e-6) << "row " << t;
    }
    EXPECT_EQ(m[1], kInf) << "a set of top_k keys is no choice";
}

// Nothing is recorded while nobody watches.
TEST_F(SelectionMargins, UnwatchedOpsRecordNothing) {
    std::vector<double> m;
    cpu_.watch_selection_margins(&m);
    cpu_.watch_selection_margins(nullptr);
    cpu_.route_softmax_topk(tensor(draw(32, -1, 1), 2), 2, true, 1.0f);
    EXPECT_TRUE(m.empty());
}

}  // namespace
}  // namespace ds4

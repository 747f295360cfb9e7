// sampled_logprobs (sampling/logprobs.h) against the definition computed the
// slow way: log-softmax in long double over the whole row, every token
// sorted (higher first, equal by lower id). Random rows of a few sizes
// (a 150k vocabulary included), rows with ties, banned (-infinity) tokens
// and a huge spread; the probabilities of the whole row sum to one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "common/error.h"
#include "sampling/logprobs.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

std::vector<long double> reference(const std::vector<float>& logits) {
    long double max = -INFINITY;
    for (float l : logits) max = std::max<long double>(max, l);
    long double sum = 0;
    for (float l : logits) sum += std::exp(static_cast<long double>(l) - max);
    std::vector<long double> out;
    for (float l : logits) out.push_back(l == -INFINITY ? -INFINITY : static_cast<long double>(l) - max - std::log(sum));
    return out;
}

void check(const std::vector<float>& logits, int32_t sampled, int n_top) {
    const std::vector<long double> ref = reference(logits);
    const SampledLogprobs got = sampled_logprobs(logits, sampled, n_top);
    EXPECT_EQ(got.sampled.id, sampled);
    EXPECT_NEAR(got.sampled.logprob, double(ref[size_t(sampled)]), 1e-5 * (1 + std::fabs(double(ref[size_t(sampled)]))));
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
    while (!order.empty() && logits[size_t(order.back())] == -INFINITY) order.pop_back();
    const size_t want = std::min<size_t>(size_t(n_top), order.size());
    ASSERT_EQ(got.top.size(), want);
    for (size_t i = 0; i < want; ++i) {
        EXPECT_EQ(got.top[i].id, order[i]) << "rank " << i;
        EXPECT_NEAR(got.top[i].logprob, double(ref[size_t(order[i])]), 1e-5 * (1 + std::fabs(double(ref[size_t(order[i])]))));
        if (i > 0) EXPECT_GE(got.top[i - 1].logprob, got.top[i].logprob);
    }
}

TEST(SampledLogprobs, MatchTheDefinitionOnRandomRows) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    for (size_t n : {size_t(1), size_t(2), size_t(7), size_t(1000), size_t(151936)}) {
        for (float scale : {0.5f, 4.0f, 40.0f}) {
            std::normal_distribution<float> normal(0.0f, scale);
            std::vector<float> logits(n);
            for (float& l : logits) l = normal(rng);
            const int32_t sampled = int32_t(rng() % n);
            for (int n_top : {0, 1, 5, kMaxTopLogprobs}) check(logits, sampled, n_top);
            // The whole row's probabilities sum to one.
            if (n <= 1000) {
                double mass = 0;
                for (size_t i = 0; i < n; ++i) mass += std::exp(double(sampled_logprobs(logits, int32_t(i), 0).sampled.logprob));
                EXPECT_NEAR(mass, 1.0, 1e-5);
            }
        }
    }
}

TEST(SampledLogprobs, TiesBannedTokensAndShortRows) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    for (int round = 0; round < 50; ++round) {
        // Few distinct values: many ties, which go to the lower id.
        std::vector<float> logits(64);
        for (float& l : logits) l = float(int(rng() % 5)) - 2.0f;
        for (int k = 0; k < 20; ++k) logits[rng() % logits.size()] = -INFINITY;
        int32_t sampled = int32_t(rng() % logits.size());
        while (logits[size_t(sampled)] == -INFINITY) sampled = int32_t(rng() % logits.size());
        check(logits, sampled, int(rng() % (kMaxTopLogprobs + 1)));
    }
    // Fewer finite tokens than asked for: only those.
    const std::vector<float> three = {-INFINITY, 1.0f, -INFINITY, 0.0f, 2.0f};
    const SampledLogprobs got = sampled_logprobs(three, 4, kMaxTopLogprobs);
    ASSERT_EQ(got.top.size(), 3u);
    EXPECT_EQ(got.top[0].id, 4);
    EXPECT_EQ(got.top[2].id, 3);
    EXPECT_EQ(sampled_logprobs(three, 0, 0).sampled.logprob, -INFINITY);
    double mass = 0;
    for (const TokenLogprob& t : got.top) mass += std::exp(double(t.logprob));
    EXPECT_NEAR(mass, 1.0, 1e-6);
    EXPECT_THROW(sampled_logprobs(three, 5, 1), Error);
    EXPECT_THROW(sampled_logprobs(three, -1, 1), Error);
    EXPECT_THROW(sampled_logprobs(std::vector<float>{}, 0, 1), Error);
}

}  // namespace
}  // namespace ds4

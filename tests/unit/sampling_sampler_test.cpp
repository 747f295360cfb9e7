#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "sampling/sampler.h"
#include "support/test_seed.h"

namespace {

uint64_t fresh_seed() { return ds4::test::test_seed(); }

std::vector<float> random_logits(std::mt19937_64& rng, size_t n, float scale = 3.0f) {
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> logits(n);
    for (float& l : logits) l = normal(rng);
    return logits;
}

int32_t first_argmax(const std::vector<float>& logits) {
    int32_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i)
        if (logits[i] > logits[best]) best = int32_t(i);
    return best;
}

ds4::SamplerParams params(float temperature, int top_k, float top_p, float min_p, uint64_t seed) {
    ds4::SamplerParams p;
    p.temperature = temperature;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.seed = seed;
    return p;
}

// The distribution the chain should sample from, computed the plain way:
// full sort, softmax, cut, renormalize at the temperature.
std::map<int32_t, double> expected_distribution(const std::vector<float>& logits, const ds4::SamplerParams& p) {
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    if (p.top_k > 0 && size_t(p.top_k) < order.size()) order.resize(size_t(p.top_k));
    auto probs_at = [&](const std::vector<int32_t>& ids, double t) {
        std::vector<double> probs;
        double sum = 0;
        for (int32_t id : ids) sum += std::exp((logits[id] - logits[ids[0]]) / t);
        for (int32_t id : ids) probs.push_back(std::exp((logits[id] - logits[ids[0]]) / t) / sum);
        return probs;
    };
    if (p.top_p < 1.0f) {
        std::vector<double> probs = probs_at(order, 1.0);
        double cum = 0;
        size_t keep = order.size();
        for (size_t i = 0; i < order.size(); ++i) {
            cum += probs[i];
            if (cum >= p.top_p) {
                keep = i + 1;
                break;
            }
        }
        order.resize(keep);
    }
    if (p.min_p > 0.0f) {
        std::vector<double> probs = probs_at(order, 1.0);
        std::vector<int32_t> kept;
        for (size_t i = 0; i < order.size(); ++i)
            if (probs[i] >= p.min_p * probs[0]) kept.push_back(order[i]);
        order = kept;
    }
    std::vector<double> probs = probs_at(order, p.temperature);
    std::map<int32_t, double> out;
    for (size_t i = 0; i < order.size(); ++i) out[order[i]] = probs[i];
    return out;
}

std::set<int32_t> sampled_set(const std::vector<float>& logits, const ds4::SamplerParams& p, int draws) {
    ds4::Sampler sampler(p);
    std::set<int32_t> seen;
    for (int i = 0; i < draws; ++i) seen.insert(sampler.sample(logits));
    return seen;
}

// Logits for given probabilities, each placed at a random id of a larger
// vocabulary whose other tokens are banned (-inf), so positions are tested too.
struct Crafted {
    std::vector<float> logits;
    std::vector<int32_t> ids;  // ids[i] carries probs[i]
};
Crafted craft(std::mt19937_64& rng, const std::vector<double>& probs, size_t vocab = 1000) {
    Crafted c{std::vector<float>(vocab, -INFINITY), {}};
    std::vector<int32_t> all(vocab);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    for (size_t i = 0; i < probs.size(); ++i) {
        c.ids.push_back(all[i]);
        c.logits[all[i]] = float(std::log(probs[i]) + 1.7);  // offset: only differences matter
    }
    return c;
}

}  // namespace

TEST(Sampler, GreedyIsArgmaxWithTiesToTheLowestId) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    for (int row = 0; row < 300; ++row) {
        std::vector<float> logits = random_logits(rng, 1 + rng() % 3000);
        if (row % 3 == 0) {  // plant a tie for the maximum
            size_t a = rng() % logits.size(), b = rng() % logits.size();
            float top = *std::max_element(logits.begin(), logits.end()) + 1.0f;
            logits[a] = logits[b] = top;
        }
        ds4::Sampler sampler(params(row % 2 ? 0.0f : -1.0f, 40, 0.95f, 0.05f, rng()));
        ASSERT_EQ(sampler.sample(logits), first_argmax(logits)) << "row " << row;
    }
}

TEST(Sampler, TopKOneIsGreedy) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    for (int row = 0; row < 300; ++row) {
        std::vector<float> logits = random_logits(rng, 2 + rng() % 3000);
        if (row % 3 == 0) {
            size_t a = rng() % logits.size(), b = rng() % logits.size();
            logits[a] = logits[b] = *std::max_element(logits.begin(), logits.end()) + 0.5f;
        }
        ds4::Sampler sampler(params(1.5f, 1, 1.0f, 0.0f, rng()));
        ASSERT_EQ(sampler.sample(logits), first_argmax(logits)) << "row " << row;
    }
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    std::vector<std::vector<float>> rows;
    for (int i = 0; i < 300; ++i) rows.push_back(random_logits(rng, 5000, 1.0f));
    auto run = [&](uint64_t s) {
        ds4::Sampler sampler(params(1.0f, 0, 0.95f, 0.0f, s));
        std::vector<int32_t> tokens;
        for (const auto& row : rows) tokens.push_back(sampler.sample(row));
        return tokens;
    };
    const uint64_t a = rng(), b = a + 1;
    EXPECT_EQ(run(a), run(a));
    // Hundreds of draws over thousands of plausible tokens: equal sequences
    // from different seeds would take a miracle or a seed that is ignored.
    EXPECT_NE(run(a), run(b));
}

TEST(Sampler, FrequenciesMatchTheTruncatedSoftmax) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const std::vector<ds4::SamplerParams> configs = {
        params(0.7f, 7, 0.9f, 0.02f, rng()), params(1.0f, 0, 1.0f, 0.0f, rng()), params(1.8f, 5, 1.0f, 0.0f, rng()),
        params(1.0f, 0, 0.8f, 0.0f, rng()), params(0.5f, 0, 1.0f, 0.1f, rng()), params(0.8f, 40, 0.95f, 0.05f, rng())};
    const int kDraws = 60000;
    for (size_t ci = 0; ci < configs.size(); ++ci) {
        const auto& p = configs[ci];
        SCOPED_TRACE("config " + std::to_string(ci));
        std::vector<float> logits = random_logits(rng, 12, 1.2f);
        std::map<int32_t, double> expected = expected_distribution(logits, p);
        ds4::Sampler sampler(p);
        std::map<int32_t, int> counts;
        for (int i = 0; i < kDraws; ++i) ++counts[sampler.sample(logits)];
        for (const auto& [id, n] : counts) ASSERT_TRUE(expected.count(id)) << "token " << id << " should have been cut";
        double chi2 = 0;
        for (const auto& [id, prob] : expected) {
            const double e = prob * kDraws, o = counts.count(id) ? counts[id] : 0;
            chi2 += (o - e) * (o - e) / e;
        }
        // A loose bound (df + 8 standard deviations + 10): a correct sampler
        // essentially never exceeds it; a wrong cut or temperature blows past.
        const double df = double(expected.size()) - 1;
        EXPECT_LT(chi2, df + 8 * std::sqrt(2 * std::max(df, 1.0)) + 10) << expected.size() << " tokens kept";
    }
}

TEST(Sampler, TopPKeepsTheSmallestHeadThatReachesP) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
    // {top_p, tokens kept}: the token that crosses top_p is kept.
    for (auto [top_p, kept] : std::vector<std::pair<float, size_t>>{{0.3f, 1}, {0.6f, 2}, {0.79f, 2}, {0.81f, 3},
                                                                     {0.94f, 3}, {0.96f, 4}, {1.0f, 4}}) {
        SCOPED_TRACE("top_p " + std::to_string(top_p));
        Crafted c = craft(rng, probs);
        // A huge temperature flattens the survivors, so each shows up often.
        std::set<int32_t> seen = sampled_set(c.logits, params(1e6f, 0, top_p, 0.0f, rng()), 2000);
        EXPECT_EQ(seen, std::set<int32_t>(c.ids.begin(), c.ids.begin() + std::ptrdiff_t(kept)));
    }
}

TEST(Sampler, MinPKeepsTokensAtLeastMinPTimesTheBest) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const std::vector<double> probs = {0.4, 0.3, 0.2, 0.06, 0.04};
    for (auto [min_p, kept] : std::vector<std::pair<float, size_t>>{
             {0.0f, 5}, {0.05f, 5}, {0.12f, 4}, {0.2f, 3}, {0.6f, 2}, {0.8f, 1}, {1.0f, 1}}) {
        SCOPED_TRACE("min_p " + std::to_string(min_p));
        Crafted c = craft(rng, probs);
        std::set<int32_t> seen = sampled_set(c.logits, params(1e6f, 0, 1.0f, min_p, rng()), 2000);
        EXPECT_EQ(seen, std::set<int32_t>(c.ids.begin(), c.ids.begin() + std::ptrdiff_t(kept)));
    }
}

TEST(Sampler, TopKKeepsExactlyKTokens) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const std::vector<double> probs = {0.3, 0.25, 0.2, 0.1, 0.08, 0.07};
    for (int k : {1, 2, 3, 5, 6, 50}) {
        SCOPED_TRACE("top_k " + std::to_string(k));
        Crafted c = craft(rng, probs);
        std::set<int32_t> seen = sampled_set(c.logits, params(1e6f, k, 1.0f, 0.0f, rng()), 2000);
        EXPECT_EQ(seen, std::set<int32_t>(c.ids.begin(), c.ids.begin() + std::min<std::ptrdiff_t>(k, 6)));
    }
}

TEST(Sampler, LargeVocabularyStaysInsideTheNucleus) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    std::vector<float> logits = random_logits(rng, 151936, 2.0f);
    for (auto p : {params(1.0f, 0, 0.9f, 0.0f, rng()), params(0.8f, 40, 0.95f, 0.05f, rng()),
                   params(1.0f, 0, 1.0f, 0.01f, rng())}) {
        std::map<int32_t, double> expected = expected_distribution(logits, p);
        ds4::Sampler sampler(p);
        for (int i = 0; i < 100; ++i) {
            int32_t id = sampler.sample(logits);
            ASSERT_TRUE(expected.count(id)) << "token " << id << " is outside the " << expected.size() << " kept";
        }
    }
}

TEST(Sampler, InvalidParametersAreErrors) {
    EXPECT_THROW(ds4::Sampler(params(NAN, 40, 0.95f, 0.05f, 1)), ds4::Error);
    EXPECT_THROW(ds4::Sampler(params(0.8f, -1, 0.95f, 0.05f, 1)), ds4::Error);
    for (float top_p : {0.0f, -0.5f, 1.01f, NAN}) EXPECT_THROW(ds4::Sampler(params(0.8f, 40, top_p, 0.05f, 1)), ds4::Error);
    for (float min_p : {-0.01f, 1.01f, NAN}) EXPECT_THROW(ds4::Sampler(params(0.8f, 40, 0.95f, min_p, 1)), ds4::Error);
    EXPECT_NO_THROW(ds4::Sampler(params(0.0f, 0, 1.0f, 0.0f, 1)));
    EXPECT_NO_THROW(ds4::Sampler(params(-1.0f, 0, 1e-6f, 1.0f, 1)));
}

TEST(Sampler, InvalidLogitsAreErrorsAndBannedTokensAreNeverDrawn) {
    ds4::Sampler sampler(params(1.0f, 0, 1.0f, 0.0f, fresh_seed()));
    EXPECT_THROW(sampler.sample(std::span<const float>{}), ds4::Error);
    std::vector<float> row = {0.0f, NAN, 1.0f};
    EXPECT_THROW(sampler.sample(row), ds4::Error);
    row = {0.0f, INFINITY};
    EXPECT_THROW(sampler.sample(row), ds4::Error);
    row = {-INFINITY, -INFINITY};
    EXPECT_THROW(sampler.sample(row), ds4::Error);
    row = {-INFINITY, 0.0f, -INFINITY, 0.0f, -INFINITY};
    for (int i = 0; i < 500; ++i) {
        int32_t id = sampler.sample(row);
        ASSERT_TRUE(id == 1 || id == 3) << id;
    }
}

// The row's best tokens the plain way (stable sort: equal logits keep the
// lower id first), as a backend's top_k_rows hands them over.
static ds4::Candidates best_of(const std::vector<float>& logits, size_t k) {
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    ds4::Candidates c;
    for (size_t i = 0; i < std::min(k, order.size()); ++i) {
        c.ids.push_back(order[i]);
        c.logits.push_back(logits[size_t(order[i])]);
    }
    return c;
}

// Sampling from the best candidates_needed() tokens draws the same tokens as
// sampling from the whole row, draw for draw from the same seed, whatever the
// chain's settings; more candidates than needed change nothing.
TEST(Sampler, CandidatesDrawWhatTheWholeRowDraws) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    for (int round = 0; round < 40; ++round) {
        const float temperature = round % 5 == 0 ? 0.0f : 0.2f + 1.5f * unit(rng);
        const int top_k = 1 + int(unit(rng) * 100);
        const float top_p = round % 3 == 0 ? 1.0f : 0.5f + 0.5f * unit(rng);
        const float min_p = round % 4 == 0 ? 0.0f : 0.2f * unit(rng);
        const uint64_t draw_seed = rng();
        std::vector<float> logits = random_logits(rng, 2000 + size_t(round) * 37, 1.0f + 3.0f * unit(rng));
        if (round % 2)  // ties at the top-k boundary and banned tokens
            for (float& l : logits) l = unit(rng) < 0.1f ? -INFINITY : std::round(l * 2.0f) / 2.0f;
        ds4::Sampler whole(params(temperature, top_k, top_p, min_p, draw_seed));
        ds4::Sampler best(params(temperature, top_k, top_p, min_p, draw_seed));
        const int need = best.candidates_needed();
        ASSERT_EQ(need, temperature <= 0.0f ? 1 : top_k);
        const ds4::Candidates c = best_of(logits, size_t(need) + size_t(round % 3) * 5);
        for (int draw = 0; draw < 30; ++draw) ASSERT_EQ(whole.sample(logits), best.sample(c)) << "round " << round << ", draw " << draw;
    }
}

TEST(Sampler, CandidatesWithoutTopKOrFromABadRowAreErrors) {
    ds4::Sampler no_top_k(params(0.8f, 0, 0.95f, 0.05f, 1));
    EXPECT_EQ(no_top_k.candidates_needed(), 0);
    const ds4::Candidates c = best_of({0.5f, 2.0f, 1.0f}, 2);
    EXPECT_THROW(no_top_k.sample(c), ds4::Error);
    ds4::Sampler greedy(params(0.0f, 0, 1.0f, 0.0f, 1));
    EXPECT_EQ(greedy.candidates_needed(), 1);
    EXPECT_EQ(greedy.sample(c), 1);
    ds4::Candidates bad = c;
    bad.first_bad = 7;
    EXPECT_THROW(greedy.sample(bad), ds4::Error);
    EXPECT_THROW(greedy.sample(ds4::Candidates{}), ds4::Error);
    ds4::Sampler top(params(1.0f, 2, 1.0f, 0.0f, 1));
    EXPECT_THROW(top.sample(best_of({-INFINITY, -INFINITY, -INFINITY}, 2)), ds4::Error);
}

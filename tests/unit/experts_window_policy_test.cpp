// WindowPolicy (experts/window_policy.h): which expert windows device slots
// back, held against what its header promises, on random routing counts
// (fresh seed each run) checked step by step against a plain restatement:
// the slots are a bijection onto the promoted windows and never more than
// the budget; the hottest used windows take free slots first; a swap needs
// a clearly hotter window and never demotes one the step used; a uniform
// router settles (no trading of equals); a skewed one converges on its hot
// set.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "common/error.h"
#include "experts/window_policy.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

// slot_of and the moves agree, no slot backs two windows, within budget.
void expect_consistent(const WindowPolicy& p, const WindowPolicyOptions& o) {
    std::set<int64_t> used;
    int64_t promoted = 0;
    for (int64_t w = 0; w < o.windows; ++w) {
        const int64_t s = p.slot_of(w);
        if (s < 0) continue;
        ASSERT_LT(s, o.slots);
        ASSERT_TRUE(used.insert(s).second) << "slot " << s << " backs two windows";
        ++promoted;
    }
    EXPECT_EQ(promoted, p.promoted());
}

TEST(WindowPolicy, FreeSlotsGoToTheHottestUsedWindowsFirst) {
    WindowPolicyOptions o;
    o.windows = 10;
    o.slots = 3;
    o.fill_per_step = 2;
    WindowPolicy p(o);
    std::vector<int32_t> c = {0, 5, 0, 1, 9, 0, 2, 0, 0, 0};
    WindowMoves m = p.step(c.data());
    ASSERT_EQ(m.promote.size(), 2u);  // fill_per_step
    EXPECT_TRUE(m.demote.empty());
    EXPECT_EQ(m.promote[0].first, 4);
    EXPECT_EQ(m.promote[1].first, 1);
    m = p.step(c.data());
    ASSERT_EQ(m.promote.size(), 1u);  // the last free slot
    EXPECT_EQ(m.promote[0].first, 6);
    expect_consistent(p, o);
}

TEST(WindowPolicy, SwapsOnlyForAClearlyHotterWindowAndNeverAUsedOne) {
    WindowPolicyOptions o;
    o.windows = 6;
    o.slots = 2;
    o.swap_ratio = 1.5;
    o.swap_margin = 1.0;
    o.half_life_steps = 0;  // no memory: the score is the step's count
    WindowPolicy p(o);
    std::vector<int32_t> c = {4, 4, 0, 0, 0, 0};
    p.step(c.data());  // 0 and 1 promoted
    // Window 2 is as hot as they were: no swap (and 0, 1 were used).
    c = {4, 4, 4, 0, 0, 0};
    EXPECT_TRUE(p.step(c.data()).empty());
    // Window 2 hot, 0 and 1 unused this step: 2 > 0 * 1.5 + 1 replaces one.
    c = {0, 0, 5, 0, 0, 0};
    WindowMoves m = p.step(c.data());
    ASSERT_EQ(m.promote.size(), 1u);
    ASSERT_EQ(m.demote.size(), 1u);
    EXPECT_EQ(m.promote[0].first, 2);
    EXPECT_EQ(p.slot_of(m.demote[0]), -1);
    EXPECT_EQ(p.slot_of(2), m.promote[0].second);
    expect_consistent(p, o);
    // Used windows are never demoted, whatever their score.
    c = {1, 0, 1, 9, 0, 0};  // 0's slot was kept or taken; 2 and 0 used
    m = p.step(c.data());
    for (const int64_t w : m.demote) EXPECT_EQ(c[size_t(w)], 0) << "window " << w << " was used and demoted";
    expect_consistent(p, o);
}

TEST(WindowPolicy, RandomStepsKeepTheInvariants) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    for (int trial = 0; trial < 20; ++trial) {
        WindowPolicyOptions o;
        o.windows = 1 + int64_t(rng() % 200);
        o.slots = int64_t(rng() % uint64_t(o.windows + 1));
        o.fill_per_step = int64_t(rng() % 10);
        o.swaps_per_step = int64_t(rng() % 5);
        o.half_life_steps = double(rng() % 64);
        WindowPolicy p(o);
        std::vector<int32_t> c(size_t(o.windows));
        for (int step = 0; step < 50; ++step) {
            for (auto& x : c) x = rng() % 4 == 0 ? int32_t(rng() % 10) : 0;
            std::map<int64_t, int64_t> before;
            for (int64_t w = 0; w < o.windows; ++w) before[w] = p.slot_of(w);
            const WindowMoves m = p.step(c.data());
            EXPECT_LE(int64_t(m.promote.size()), o.fill_per_step + o.swaps_per_step);
            EXPECT_LE(int64_t(m.demote.size()), o.swaps_per_step);
            for (const int64_t w : m.demote) {
                EXPECT_GE(before[w], 0) << "demoted a window that was not promoted";
                EXPECT_EQ(c[size_t(w)], 0) << "demoted a window the step used";
            }
            for (const auto& [w, s] : m.promote) {
                EXPECT_EQ(before[w], -1) << "promoted a window already promoted";
                EXPECT_GT(c[size_t(w)], 0) << "promoted a window the step did not use";
                EXPECT_EQ(p.slot_of(w), s);
            }
            expect_consistent(p, o);
        }
    }
}

TEST(WindowPolicy, UniformRoutingSettlesSkewedRoutingConverges) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    WindowPolicyOptions o;
    o.windows = 128;
    o.slots = 32;
    WindowPolicy uniform(o), skewed(o);
    std::vector<int32_t> c(128);
    int64_t late_swaps = 0;
    for (int step = 0; step < 400; ++step) {
        std::fill(c.begin(), c.end(), 0);
        for (int k = 0; k < 8; ++k) ++c[size_t(rng() % 128)];
        const WindowMoves m = uniform.step(c.data());
        if (step >= 200) late_swaps += int64_t(m.demote.size());
    }
    std::printf("uniform routing: %lld swaps in the last 200 steps\n", static_cast<long long>(late_swaps));
    // Equals are not traded: a replacement needs 1.5x the score plus one.
    EXPECT_LT(late_swaps, 200) << "a uniform router keeps trading experts";
    // Skewed: windows 0..31 drawn 9 times in 10.
    for (int step = 0; step < 400; ++step) {
        std::fill(c.begin(), c.end(), 0);
        for (int k = 0; k < 8; ++k) ++c[size_t(rng() % 10 < 9 ? rng() % 32 : 32 + rng() % 96)];
        skewed.step(c.data());
    }
    int64_t hot_promoted = 0;
    for (int64_t w = 0; w < 32; ++w) hot_promoted += skewed.slot_of(w) >= 0;
    EXPECT_GE(hot_promoted, 28) << "the skewed router's hot set is not on the device";
}

TEST(WindowPolicy, PreloadFillsFreeSlotsInOrder) {
    WindowPolicyOptions o;
    o.windows = 8;
    o.slots = 2;
    WindowPolicy p(o);
    const WindowMoves m = p.preload({5, 5, -1, 9, 3, 1});
    ASSERT_EQ(m.promote.size(), 2u);
    EXPECT_EQ(m.promote[0].first, 5);
    EXPECT_EQ(m.promote[1].first, 3);
    EXPECT_EQ(p.promoted(), 2);
}

TEST(WindowPolicy, BadSizesAreOneSentence) {
    WindowPolicyOptions o;
    o.windows = 2;
    o.slots = 3;
    EXPECT_THROW(WindowPolicy{o}, Error);
    o.slots = -1;
    EXPECT_THROW(WindowPolicy{o}, Error);
}

}  // namespace
}  // namespace ds4

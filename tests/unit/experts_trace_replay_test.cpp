// Replaying routing traces through the expert cache's policy
// (experts/cache_policy.h, the code ExpertCache runs). The oracles here are
// not the policy: either a textbook LRU written out below, for the cases
// where the policy must reduce to one, or properties anyone can state
// without reading the code. Fresh traces each run.
//
// When does the frequency policy reduce to LRU? With a half-life of one
// step of one block (one tick) and one expert per token: an expert's decayed
// count is then below 2^-(ticks since its last use) * 2, so a more recently
// used expert is always hotter, and a fresh miss (count >= 1) is hotter
// than every cached one, so it never goes to scratch. The host tier is
// plain LRU whatever the device does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <list>
#include <map>
#include <random>
#include <set>
#include <string>

#include "common/error.h"
#include "experts/routing_trace.h"
#include "experts/routing_trace_synth.h"
#include "experts/trace_replay.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

// A textbook LRU set of `capacity` keys: access() says whether it was a hit.
class Lru {
public:
    explicit Lru(size_t capacity) : capacity_(capacity) {}
    bool access(uint64_t key) {
        const auto it = std::find(order_.begin(), order_.end(), key);
        const bool hit = it != order_.end();
        if (hit) order_.erase(it);
        else if (order_.size() == capacity_) order_.pop_back();
        if (capacity_ > 0) order_.push_front(key);
        return hit;
    }
    bool contains(uint64_t key) const { return std::find(order_.begin(), order_.end(), key) != order_.end(); }
    void touch(uint64_t key) {
        order_.remove(key);
        order_.push_front(key);
    }

private:
    size_t capacity_;
    std::list<uint64_t> order_;  // most recent first
};

uint64_t key(int layer, int32_t e) { return (uint64_t(uint32_t(layer)) << 32) | uint32_t(e); }

// Decode steps of one expert per token with a random popularity, so
// experts come back at all distances.
RoutingTrace one_per_token_trace(std::mt19937_64& rng, int64_t blocks, int64_t experts, uint64_t tokens) {
    return zipf_routing_trace(TraceShape{blocks, experts, 1}, tokens, double(rng() % 15) / 10.0, rng());
}

ReplayOptions lru_options(const RoutingTrace& t, int64_t device, int64_t host) {
    ReplayOptions o;
    o.device_slots = device;
    o.host_slots = host;
    o.half_life_steps = 1.0 / double(t.blocks.size());  // one tick
    return o;
}

TEST(TraceReplay, OneExpertPerTokenAndAOneTickHalfLifeIsExactlyLru) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    for (int round = 0; round < 20; ++round) {
        const int64_t blocks = 1 + int64_t(rng() % 4), experts = 2 + int64_t(rng() % 30);
        const RoutingTrace t = one_per_token_trace(rng, blocks, experts, 100 + rng() % 400);
        const int64_t total = blocks * experts;
        const int64_t slots = 1 + int64_t(rng() % uint64_t(total - 1));  // fewer than all: a real eviction policy
        Lru lru{size_t(slots)};
        uint64_t hits = 0;
        for (size_t r = 0; r < t.routes.size(); ++r) hits += lru.access(key(t.routes[r].layer, t.route_ids(r)[0]));
        const ReplayResult res = replay_trace(t, lru_options(t, slots, 0));
        SCOPED_TRACE("slots " + std::to_string(slots) + " of " + std::to_string(total));
        EXPECT_EQ(res.counts.lookups, t.routes.size());
        EXPECT_EQ(res.counts.hits, hits);
        EXPECT_EQ(res.counts.misses, t.routes.size() - hits);
        EXPECT_EQ(res.counts.scratch_loads, 0u);  // a fresh miss is never the coldest
    }
}

TEST(TraceReplay, TheHostTierIsLruOverTheDeviceMisses) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    for (int round = 0; round < 20; ++round) {
        const int64_t blocks = 1 + int64_t(rng() % 3), experts = 3 + int64_t(rng() % 30);
        const RoutingTrace t = one_per_token_trace(rng, blocks, experts, 100 + rng() % 400);
        const int64_t total = blocks * experts;
        const int64_t device = 1 + int64_t(rng() % uint64_t(total - 1));
        // Sometimes every expert: the tier is then filled at start.
        const int64_t host = rng() % 4 == 0 ? total + int64_t(rng() % 5) : 1 + int64_t(rng() % uint64_t(total));
        Lru dev{size_t(device)}, tier{size_t(std::min(host, total))};
        if (host >= total)
            for (const PolicyBlock& b : t.blocks)
                for (int32_t e = 0; e < b.n_expert; ++e) tier.access(key(b.layer, e));
        uint64_t hits = 0, host_hits = 0;
        for (size_t r = 0; r < t.routes.size(); ++r) {
            const uint64_t k = key(t.routes[r].layer, t.route_ids(r)[0]);
            if (dev.access(k)) {
                ++hits;  // a device hit does not touch the host tier
            } else if (tier.contains(k)) {
                ++host_hits;
                tier.touch(k);
            } else {
                tier.access(k);  // read from the disk into the tier
            }
        }
        const ReplayResult res = replay_trace(t, lru_options(t, device, host));
        SCOPED_TRACE("device " + std::to_string(device) + ", host " + std::to_string(host) + " of " +
                     std::to_string(total));
        EXPECT_EQ(res.counts.hits, hits);
        EXPECT_EQ(res.counts.host_hits, host_hits);
        if (host >= total) EXPECT_EQ(res.counts.host_hits, res.counts.misses);
    }
}

TEST(TraceReplay, LruHitsGrowWithTheBudget) {
    // LRU is a stack algorithm (a bigger cache holds a superset), so its
    // hits never fall as the budget grows. The frequency policy with
    // scratch is not one, and nothing like this is asserted for it.
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const RoutingTrace t = one_per_token_trace(rng, 2, 24, 600);
    uint64_t last = 0;
    for (int64_t slots = 1; slots <= 48; ++slots) {
        const uint64_t hits = replay_trace(t, lru_options(t, slots, 0)).counts.hits;
        EXPECT_GE(hits, last) << "slots " << slots;
        last = hits;
    }
}

// Distinct (layer, expert) pairs and per-step distinct lookups of a trace.
std::pair<uint64_t, uint64_t> distinct_and_lookups(const RoutingTrace& t) {
    std::set<uint64_t> all;
    uint64_t lookups = 0;
    for (size_t r = 0; r < t.routes.size(); ++r) {
        std::set<int32_t> step;
        for (int32_t e : t.route_ids(r)) {
            step.insert(e);
            all.insert(key(t.routes[r].layer, e));
        }
        lookups += step.size();
    }
    return {all.size(), lookups};
}

TEST(TraceReplay, ABudgetOfEveryExpertMissesEachExpertOnceAndNeverEvicts) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    for (int round = 0; round < 10; ++round) {
        const TraceShape shape{1 + int64_t(rng() % 5), 8 + int64_t(rng() % 60), 1 + int64_t(rng() % 8)};
        const RoutingTrace t = zipf_routing_trace(shape, 50 + rng() % 200, double(rng() % 15) / 10.0, rng());
        const auto [distinct, lookups] = distinct_and_lookups(t);
        const int64_t total = shape.blocks * shape.experts;
        for (int64_t slots : {int64_t(0), total, total + 1 + int64_t(rng() % 100)}) {
            ReplayOptions o;
            o.device_slots = slots;
            o.host_slots = int64_t(rng() % 2) * total;  // no tier when the device holds all
            const ReplayResult r = replay_trace(t, o);
            EXPECT_EQ(r.counts.lookups, lookups);
            EXPECT_EQ(r.counts.hits, lookups - distinct);
            EXPECT_EQ(r.counts.misses, distinct);
            EXPECT_EQ(r.counts.evictions, 0u);
            EXPECT_EQ(r.counts.scratch_loads, 0u);
            EXPECT_EQ(r.host_slots, 0);
        }
    }
}

TEST(TraceReplay, OneSlotHitsAtMostOnceAStep) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const TraceShape shape{1 + int64_t(rng() % 4), 8 + int64_t(rng() % 60), 2 + int64_t(rng() % 6)};
    const RoutingTrace t = zipf_routing_trace(shape, 300, 1.0 + double(rng() % 10) / 10.0, rng());
    ReplayOptions o;
    o.device_slots = 1;
    const ReplayResult r = replay_trace(t, o);
    const auto [distinct, lookups] = distinct_and_lookups(t);
    EXPECT_EQ(r.device_slots, 1);
    EXPECT_EQ(r.scratch_slots, shape.experts_per_token);
    EXPECT_EQ(r.counts.lookups, lookups);
    EXPECT_EQ(r.counts.hits + r.counts.misses, lookups);
    EXPECT_LE(r.counts.hits, t.routes.size());
    // At most one miss a step takes the one remembered slot; the rest go to scratch.
    EXPECT_GE(r.counts.scratch_loads + t.routes.size(), r.counts.misses);
    EXPECT_EQ(r.whole_steps, 0u);  // one token always fits slot + scratch
}

TEST(TraceReplay, OneStepRepeatedMissesOnlyWhileWarmingUp) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    for (int round = 0; round < 10; ++round) {
        const TraceShape shape{1 + int64_t(rng() % 5), 8 + int64_t(rng() % 60), 1 + int64_t(rng() % 8)};
        const RoutingTrace once = zipf_routing_trace(shape, 1, 1.0, rng());
        RoutingTrace t = once;
        const uint64_t repeats = 2 + rng() % 300;
        for (uint64_t i = 1; i < repeats; ++i)
            for (size_t r = 0; r < once.routes.size(); ++r) {
                t.routes.push_back(TraceRoute{once.routes[r].layer, 1, t.ids.size()});
                for (int32_t e : once.route_ids(r)) t.ids.push_back(e);
            }
        const uint64_t working = uint64_t(shape.blocks * shape.experts_per_token);
        ReplayOptions o;
        o.device_slots = int64_t(working) + int64_t(rng() % 10);  // the working set fits
        const ReplayResult r = replay_trace(t, o);
        EXPECT_EQ(r.counts.misses, working);
        EXPECT_EQ(r.counts.hits, working * (repeats - 1));
        EXPECT_EQ(r.counts.evictions, 0u);
    }
}

TEST(TraceReplay, SkewHelpsAndUniformHitsAboutTheBudget) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const TraceShape shape{4, 64, 4};
    const RoutingTrace uniform = zipf_routing_trace(shape, 1500, 0, rng());
    const RoutingTrace skewed = zipf_routing_trace(shape, 1500, 1.2, rng());
    ReplayOptions o;
    o.device_slots = 128;  // half of the 256 experts
    const double u = replay_trace(uniform, o).hit_rate();
    const double z = replay_trace(skewed, o).hit_rate();
    // Uniform routing: any cache of half the experts holds a chosen one
    // about half the time.
    EXPECT_NEAR(u, 0.5, 0.1);
    EXPECT_GT(z, u + 0.1);
}

TEST(TraceReplay, PrefillStepsReadWholeBlocksAsTheCacheDecides) {
    // One step of many rows that misses most of the block: automatic and
    // full-layer read it whole (no lookups counted); per-expert does not
    // when it fits the slots.
    RoutingTrace t;
    t.source = "test";
    t.experts_per_token = 2;
    t.blocks = {PolicyBlock{0, 8}};
    t.routes = {TraceRoute{0, 4, 0}};
    t.ids = {0, 1, 2, 3, 4, 5, 6, 7};
    ReplayOptions o;
    o.device_slots = 8;
    for (auto [strategy, whole] : {std::pair{PrefillStrategy::automatic, 1u}, std::pair{PrefillStrategy::full_layer, 1u},
                                   std::pair{PrefillStrategy::per_expert, 0u}}) {
        o.prefill = strategy;
        o.device_slots = 7;
        const ReplayResult r = replay_trace(t, o);
        EXPECT_EQ(r.whole_steps, whole);
        EXPECT_EQ(r.counts.lookups, whole ? 0u : 8u);
    }
    EXPECT_THROW(replay_trace(t, ReplayOptions{-1, 0, PrefillStrategy::automatic, 32}), Error);
}

}  // namespace
}  // namespace ds4

// DrainGate: requests counted from routing to their last byte; once closed
// it refuses new ones, and wait_idle_until() returns when the counted ones
// are all answered (or at the deadline). Threads leave in a random order.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>
#include <vector>

#include "server/drain_gate.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

using Clock = std::chrono::steady_clock;

TEST(ServerDrainGate, ClosedGateRefusesAndCountsNothing) {
    DrainGate g;
    EXPECT_FALSE(g.closed());
    ASSERT_TRUE(g.enter());
    g.close();
    EXPECT_TRUE(g.closed());
    EXPECT_FALSE(g.enter());
    EXPECT_EQ(g.in_flight(), 1);
    g.leave();
    EXPECT_EQ(g.in_flight(), 0);
    g.leave();  // an extra leave never goes below zero
    EXPECT_EQ(g.in_flight(), 0);
    EXPECT_TRUE(g.wait_idle_until(Clock::now()));
}

TEST(ServerDrainGate, WaitEndsAtTheDeadlineWhileRequestsRemain) {
    DrainGate g;
    ASSERT_TRUE(g.enter());
    g.close();
    const auto t0 = Clock::now();
    EXPECT_FALSE(g.wait_idle_until(t0 + std::chrono::milliseconds(50)));
    EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(50));
}

TEST(ServerDrainGate, WaitEndsWhenTheLastRequestLeaves) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const int n = 2 + static_cast<int>(rng() % 30);
    DrainGate g;
    for (int i = 0; i < n; ++i) ASSERT_TRUE(g.enter());
    g.close();
    std::vector<int> delay_ms(static_cast<size_t>(n));
    for (int& d : delay_ms) d = static_cast<int>(rng() % 40);
    std::vector<std::thread> leavers;
    for (int d : delay_ms)
        leavers.emplace_back([&g, d] {
            std::this_thread::sleep_for(std::chrono::milliseconds(d));
            g.leave();
        });
    EXPECT_TRUE(g.wait_idle_until(Clock::now() + std::chrono::seconds(30)));
    EXPECT_EQ(g.in_flight(), 0);
    for (auto& t : leavers) t.join();
}

}  // namespace
}  // namespace ds4

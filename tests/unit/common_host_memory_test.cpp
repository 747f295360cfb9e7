// The memory cgroup's room (common/host_memory.h) on cgroup trees written
// to a temporary directory: v1 and v2 layouts, a limit on the cgroup or on
// an ancestor (the tightest binds), page cache not counted as held, usage
// over the limit, no limit at all. Sizes drawn fresh each run.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "common/host_memory.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kNone = UINT64_MAX;
constexpr uint64_t kV1NoLimit = 9223372036854771712ull;  // what v1 shows without a limit

class CgroupRoomTest : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/ds4_cgroup_XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        root_ = tmpl;
        seed_ = test::test_seed();
        rng_.seed(seed_);
    }
    void TearDown() override { fs::remove_all(root_); }

    static void write(const fs::path& p, const std::string& text) {
        fs::create_directories(p.parent_path());
        std::ofstream(p) << text;
    }
    // A v1 level: limit, usage, and its page cache split in two.
    void v1_level(const std::string& dir, uint64_t limit, uint64_t usage, uint64_t inactive, uint64_t active) {
        const fs::path d = fs::path(root_) / "memory" / dir;
        write(d / "memory.limit_in_bytes", std::to_string(limit) + "\n");
        write(d / "memory.usage_in_bytes", std::to_string(usage) + "\n");
        write(d / "memory.stat", "cache 1\nrss 2\ninactive_file 999\ntotal_inactive_file " + std::to_string(inactive) +
                                     "\ntotal_active_file " + std::to_string(active) + "\ntotal_rss 5\n");
    }
    // A v2 level; `limit` kNone writes "max".
    void v2_level(const std::string& dir, uint64_t limit, uint64_t usage, uint64_t inactive, uint64_t active) {
        const fs::path d = fs::path(root_) / dir;
        write(d / "memory.max", (limit == kNone ? std::string("max") : std::to_string(limit)) + "\n");
        write(d / "memory.current", std::to_string(usage) + "\n");
        write(d / "memory.stat", "anon 7\nfile 123\ninactive_file " + std::to_string(inactive) + "\nactive_file " +
                                     std::to_string(active) + "\n");
    }
    uint64_t gib(int lo, int hi) { return std::uniform_int_distribution<uint64_t>(uint64_t(lo) << 30, uint64_t(hi) << 30)(rng_); }

    std::string root_;
    uint64_t seed_ = 0;
    std::mt19937_64 rng_;
};

TEST_F(CgroupRoomTest, V1LimitLessHeldMemory) {
    SCOPED_TRACE(test::seed_note(seed_));
    const uint64_t limit = gib(4, 64), inactive = gib(0, 1), active = gib(0, 1), anon = gib(0, 3);
    v1_level("", kV1NoLimit, gib(10, 20), 0, 0);
    v1_level("a", kV1NoLimit, gib(10, 20), 0, 0);
    v1_level("a/b", limit, anon + inactive + active, inactive, active);
    const std::string self = "9:name=systemd:/\n4:memory:/a/b\n3:cpuset:/\n0::/\n";
    EXPECT_EQ(cgroup_memory_room(self, root_), limit - anon);
    // The controller named among others on its line.
    EXPECT_EQ(cgroup_memory_room("5:cpu,memory,pids:/a/b\n", root_), limit - anon);
    // No limit on the way up: none.
    EXPECT_EQ(cgroup_memory_room("4:memory:/a\n", root_), kNone);
    EXPECT_EQ(cgroup_memory_room("4:memory:/\n", root_), kNone);
}

TEST_F(CgroupRoomTest, TheTightestAncestorBinds) {
    SCOPED_TRACE(test::seed_note(seed_));
    const uint64_t inner = gib(8, 64), outer = gib(8, 64), held_inner = gib(0, 4), held_outer = gib(0, 6);
    v2_level("", kNone, 0, 0, 0);
    v2_level("x", outer, held_outer + (1u << 20), 1u << 20, 0);
    v2_level("x/y", inner, held_inner, 0, 0);
    EXPECT_EQ(cgroup_memory_room("0::/x/y\n", root_), std::min(inner - held_inner, outer - held_outer));
    v1_level("p", outer, held_outer, 0, 0);
    v1_level("p/q", kV1NoLimit, held_inner, 0, 0);
    EXPECT_EQ(cgroup_memory_room("7:memory:/p/q\n0::/x/y\n", root_), outer - held_outer) << "v1's memory line wins";
}

TEST_F(CgroupRoomTest, FullNoLimitOrNothingThere) {
    SCOPED_TRACE(test::seed_note(seed_));
    const uint64_t limit = gib(1, 8);
    v2_level("full", limit, limit + gib(0, 1), 0, 0);
    EXPECT_EQ(cgroup_memory_room("0::/full\n", root_), 0u);
    v2_level("open", kNone, gib(1, 8), 0, 0);
    EXPECT_EQ(cgroup_memory_room("0::/open\n", root_), kNone);
    EXPECT_EQ(cgroup_memory_room("0::/not/there\n", root_), kNone);
    EXPECT_EQ(cgroup_memory_room("", root_), kNone);
    EXPECT_EQ(cgroup_memory_room("garbage\n", root_), kNone);
}

TEST(HostMemory, AvailableIsWithinTheMachine) {
    const uint64_t total = total_host_memory(), avail = available_host_memory();
    ASSERT_GT(total, 0u);
    EXPECT_GT(avail, 0u);
    EXPECT_LE(avail, total);
}

// The plan says when the cgroup, not the machine, set the budget.
TEST(HostMemory, TheNoteNamesTheCgroupOnlyWhenItBinds) {
    const uint64_t gib = uint64_t{1} << 30;
    EXPECT_EQ(cgroup_limit_note(20 * gib, kNone), "");
    EXPECT_EQ(cgroup_limit_note(20 * gib, 20 * gib), "");
    EXPECT_EQ(cgroup_limit_note(20 * gib, 30 * gib), "");
    EXPECT_EQ(cgroup_limit_note(20 * gib + gib / 2, 5 * gib),
              "the memory cgroup's room; the machine's MemAvailable is 20.50 GiB");
}

}  // namespace
}  // namespace ds4

// Host buffers for sequence state (common/bulk_floats.h): they hold what is
// written into them through copies, moves and growth, at sizes below and
// above a huge page; a large one starts on a 2 MiB boundary and, where the
// kernel's transparent huge pages are not off, its mapping is marked
// eligible for them (the advice that spares ~500 page faults per MiB).
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "common/bulk_floats.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

StateFloats random_floats(std::mt19937_64& rng, size_t n) {
    StateFloats v(n);
    std::uniform_real_distribution<float> d(-1e3f, 1e3f);
    for (float& x : v) x = d(rng);
    return v;
}

TEST(BulkFloats, HoldWhatIsWrittenThroughCopiesMovesAndGrowth) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    for (size_t n : {size_t{0}, size_t{1}, size_t{1} + rng() % 1000, (size_t{2} << 20) / 4 + rng() % 100000}) {
        const StateFloats a = random_floats(rng, n);
        StateFloats b = a;
        ASSERT_TRUE(a == b) << n;
        StateFloats c = std::move(b);
        ASSERT_TRUE(a == c) << n;
        const size_t more = 1 + rng() % 5000;
        c.resize(n + more);
        ASSERT_TRUE(std::equal(a.begin(), a.end(), c.begin())) << n;
        c.assign(a.begin(), a.end());
        ASSERT_TRUE(a == c) << n;
    }
}

// The smaps entry of the mapping holding `p`: its THPeligible value, -1 when
// the kernel does not report it.
int thp_eligible(const void* p) {
    std::ifstream smaps("/proc/self/smaps");
    const auto at = reinterpret_cast<uintptr_t>(p);
    std::string line;
    bool inside = false;
    while (std::getline(smaps, line)) {
        uintptr_t lo = 0, hi = 0;
        char dash = 0;
        std::istringstream head(line);
        if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
            inside = lo <= at && at < hi;
            continue;
        }
        if (inside && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
    }
    return -1;
}

TEST(BulkFloats, ALargeBufferIsHugePageAlignedAndAdvised) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const size_t n = (size_t{8} << 20) / 4 + rng() % (size_t{4} << 20);
    StateFloats v = random_floats(rng, n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % (uintptr_t{2} << 20), 0u);
    std::ifstream mode_file("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string mode((std::istreambuf_iterator<char>(mode_file)), {});
    const int eligible = thp_eligible(v.data());
    if (mode.empty() || mode.find("[never]") != std::string::npos || eligible < 0)
        GTEST_SKIP() << "this kernel has transparent huge pages off or does not report THPeligible";
    EXPECT_EQ(eligible, 1) << "THP mode: " << mode;
}

}  // namespace
}  // namespace ds4

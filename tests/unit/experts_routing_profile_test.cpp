// The routing profile file (--ssd-streaming-profile): counts written by one
// run come back exactly, runs add up, and a file that is not this model's
// profile (another model, a damaged or truncated file, random bytes) reads
// as an empty profile with one warning, never as wrong counts or a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <cstdint>
#include <map>
#include <random>
#include <string>

#include "experts/routing_profile.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

namespace fs = std::filesystem;

struct TempPath {
    explicit TempPath(std::mt19937_64& rng)
        : path((fs::temp_directory_path() / ("ds4-profile-" + std::to_string(rng()))).string()) {}
    ~TempPath() { fs::remove(path); }
    std::string path;
};

ExpertCounts random_counts(std::mt19937_64& rng) {
    std::map<std::pair<int, int64_t>, uint64_t> m;
    const int n = 1 + int(rng() % 300);
    for (int i = 0; i < n; ++i) m[{int(rng() % 64), int64_t(rng() % 512)}] += 1 + rng() % 1000000;
    return {m.begin(), m.end()};
}

std::map<std::pair<int, int64_t>, uint64_t> as_map(const ExpertCounts& c) {
    std::map<std::pair<int, int64_t>, uint64_t> m;
    for (const auto& [k, v] : c) m[k] += v;
    return m;
}

std::string file_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

void write_text(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

TEST(RoutingProfile, RoundTripsAndAddsRuns) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE("DS4_TEST_SEED=" + std::to_string(seed));
    std::mt19937_64 rng(seed);
    TempPath file(rng);
    const std::string id = "model-" + std::to_string(rng());
    std::string warning = "stale";
    EXPECT_TRUE(read_routing_profile(file.path, id, warning).empty()) << "an absent file is an empty profile";
    EXPECT_TRUE(warning.empty());

    const ExpertCounts a = random_counts(rng), b = random_counts(rng);
    write_routing_profile(file.path, id, a);
    EXPECT_EQ(as_map(read_routing_profile(file.path, id, warning)), as_map(a));
    EXPECT_TRUE(warning.empty()) << warning;
    write_routing_profile(file.path, id, b);
    auto sum = as_map(a);
    for (const auto& [k, v] : b) sum[k] += v;
    EXPECT_EQ(as_map(read_routing_profile(file.path, id, warning)), sum) << "a second run's counts add to the first's";

    // Hottest first: every pair once, counts never increasing along the list.
    const ExpertCounts all = read_routing_profile(file.path, id, warning);
    const auto hot = hottest_first(all);
    ASSERT_EQ(hot.size(), sum.size());
    for (size_t i = 1; i < hot.size(); ++i) EXPECT_GE(sum.at(hot[i - 1]), sum.at(hot[i]));

    // Another model's run neither reads these counts nor adds to them.
    EXPECT_TRUE(read_routing_profile(file.path, id + "x", warning).empty());
    EXPECT_NE(warning.find("another model"), std::string::npos) << warning;
}

TEST(RoutingProfile, DamagedFilesReadAsEmptyWithOneWarning) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE("DS4_TEST_SEED=" + std::to_string(seed));
    std::mt19937_64 rng(seed);
    TempPath file(rng);
    const std::string id = "model-" + std::to_string(rng());
    write_routing_profile(file.path, id, random_counts(rng));
    const std::string good = file_text(file.path);
    const size_t body = good.find('\n', good.find('\n') + 1) + 1;  // first byte after the two header lines

    std::vector<std::string> damaged = {
        "", "not a profile\n", good.substr(0, good.find('\n')),  // magic only: no model line
        good + "1 2 3\n",                                        // a line after the trailer
        good.substr(0, body) + "1 2\n",                          // a count missing
        good.substr(0, body) + "1 2 3 4\n",                      // a field too many
        good.substr(0, body) + "-1 2 3\n",                       // negative layer
        good.substr(0, body) + "1 -2 3\n",                       // negative expert
        good.substr(0, body) + "1 2 -3\n",                       // negative count
        good.substr(0, body) + "1 2 99999999999999999999999\n",  // count out of range
        good.substr(0, body) + "1 two 3\n",
    };
    // Random damage: a byte of the body replaced by a letter, or random bytes after the header.
    for (int i = 0; i < 50; ++i) {
        std::string t = good;
        t[body + rng() % (t.size() - body)] = char('a' + rng() % 26);
        if (t != good) damaged.push_back(t);
        std::string r = good.substr(0, body);
        for (int j = 0, n = 1 + int(rng() % 64); j < n; ++j) r.push_back(char(rng() % 256));
        damaged.push_back(r);  // no trailer, whatever the bytes
    }
    for (const std::string& text : damaged) {
        write_text(file.path, text);
        std::string warning;
        const ExpertCounts c = read_routing_profile(file.path, id, warning);
        EXPECT_TRUE(c.empty()) << "read counts from a damaged file: " << testing::PrintToString(text.substr(0, 80));
        EXPECT_FALSE(warning.empty()) << "no warning for " << testing::PrintToString(text.substr(0, 80));
        EXPECT_EQ(warning.find('\n'), std::string::npos) << "one sentence: " << warning;
    }

    // A file cut anywhere, even at the end of a line, is damaged: never
    // fewer or smaller counts than the run recorded.
    for (int i = 0; i < 50; ++i) {
        const size_t cut = body + rng() % (good.size() - body);
        write_text(file.path, good.substr(0, cut));
        std::string warning;
        EXPECT_TRUE(read_routing_profile(file.path, id, warning).empty()) << "cut at " << cut << " of " << good.size();
        EXPECT_NE(warning.find("ignoring it"), std::string::npos) << "cut at " << cut << ": " << warning;
    }
}

TEST(RoutingProfile, UnwritablePathThrowsOneSentence) {
    std::string msg;
    try {
        write_routing_profile("/nonexistent-dir-ds4/profile", "m", {{{0, 1}, 2}});
    } catch (const std::exception& e) {
        msg = e.what();
    }
    EXPECT_NE(msg.find("cannot write the routing profile"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ds4

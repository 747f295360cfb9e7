// LayerRange: the --layers forms, their meaning as a half-open block range,
// the spelling back, and the one check against a model's block count.
// Random slices are drawn fresh each run.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "common/error.h"
#include "common/layer_range.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

TEST(LayerRange, InclusiveSpellingIsHalfOpenRange) {
    const LayerRange r = parse_layer_range("3:9");
    EXPECT_EQ(r.begin, 3);
    EXPECT_EQ(r.end, 10);  // both ends inclusive on the command line
    EXPECT_FALSE(r.has_embedding());
    EXPECT_FALSE(r.has_output(48));
    EXPECT_TRUE(r.has_output(10));  // the stage holding the last block applies the head
    EXPECT_EQ(r.end_of(48), 10);
    EXPECT_EQ(r.count(48), 7);
    EXPECT_EQ(r.spelling(48), "3:9");
    EXPECT_EQ(r.spelling(10), "3:output");
    EXPECT_EQ(r.spelling(), "3:9");
}

TEST(LayerRange, ThroughOutput) {
    const LayerRange r = parse_layer_range("24:output");
    EXPECT_EQ(r.end, LayerRange::kThroughLast);
    EXPECT_TRUE(r.has_output(48));
    EXPECT_EQ(r.end_of(48), 48);
    EXPECT_EQ(r.spelling(48), "24:output");
    EXPECT_EQ(r.spelling(), "24:output");
    EXPECT_TRUE(parse_layer_range("0:output").has_embedding());
    EXPECT_TRUE(parse_layer_range("0:output").is_all());
    EXPECT_TRUE(parse_layer_range("0:0").has_embedding());
    EXPECT_TRUE(LayerRange::all().is_all());
}

TEST(LayerRange, Malformed) {
    for (const char* bad : {"", ":", "3", "3:", ":3", "a:3", "3:b", "3:4:5", "3-4", " 3:4", "3:4 ", "+3:4",
                            "-1:4", "3:OUTPUT", "output:3", "4:3", "99999999999:1", "1:99999999999", "0x1:2"}) {
        SCOPED_TRACE(bad);
        try {
            parse_layer_range(bad);
            ADD_FAILURE() << "accepted";
        } catch (const UsageError& e) {
            std::string msg = e.what();
            EXPECT_EQ(msg.rfind("--layers", 0), 0u) << msg;
            EXPECT_EQ(msg.find('\n'), std::string::npos);
        }
    }
}

TEST(LayerRange, AgainstModel) {
    EXPECT_EQ(layer_range_problem(parse_layer_range("0:47"), 48), "");
    EXPECT_EQ(layer_range_problem(parse_layer_range("47:output"), 48), "");
    EXPECT_NE(layer_range_problem(parse_layer_range("0:48"), 48), "");
    EXPECT_NE(layer_range_problem(parse_layer_range("48:output"), 48), "");
    EXPECT_EQ(layer_range_problem(parse_layer_range("40:47"), 32), "40:47 is outside the model's 32 layers (0..31)");
    EXPECT_EQ(layer_range_problem(LayerRange{3, 3}, 32), "3:2 holds no layer");
    EXPECT_NE(layer_range_problem(LayerRange::all(), 0), "");
}

TEST(LayerRange, RandomRoundTrip) {
    const uint64_t seed = ds4::test::test_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 1000; ++i) {
        int a = std::uniform_int_distribution<int>(0, 200)(rng);
        int b = std::uniform_int_distribution<int>(0, 200)(rng);
        bool out = rng() % 4 == 0;
        std::string text = std::to_string(a) + ":" + (out ? std::string("output") : std::to_string(b));
        if (!out && a > b) {
            EXPECT_THROW(parse_layer_range(text), UsageError) << text;
            continue;
        }
        const LayerRange r = parse_layer_range(text);
        EXPECT_EQ(r.spelling(), text);
        EXPECT_EQ(parse_layer_range(r.spelling()), r);
        int n = std::uniform_int_distribution<int>(1, 256)(rng);
        bool fits = a < n && (out || b < n);
        if (fits) {
            EXPECT_EQ(layer_range_problem(r, n), "") << text << " n=" << n;
            EXPECT_EQ(r.end_of(n), out ? n : b + 1);
            EXPECT_EQ(r.has_output(n), out || b + 1 == n);
        } else {
            EXPECT_NE(layer_range_problem(r, n), "") << text << " n=" << n;
        }
    }
}

}  // namespace
}  // namespace ds4

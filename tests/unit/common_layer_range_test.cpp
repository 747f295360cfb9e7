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
    // Reaching the last block is not owning the head: only "output" says so
    // (a coordinator with 0:2,output applies it after this worker's 3:9).
    EXPECT_FALSE(r.has_output(10));
    EXPECT_TRUE(r.has_last_block(10));
    EXPECT_EQ(r.end_of(48), 10);
    EXPECT_EQ(r.count(48), 7);
    EXPECT_EQ(r.spelling(48), "3:9");
    EXPECT_EQ(r.spelling(10), "3:9");
    EXPECT_EQ(r.spelling(), "3:9");
    // A range built in code keeps the head with the last block.
    EXPECT_TRUE((LayerRange{3, 10}).has_output(10));
    EXPECT_FALSE((LayerRange{3, 10}).has_output(48));
    EXPECT_EQ((LayerRange{3, 10}).spelling(10), "3:output");
}

TEST(LayerRange, BlocksAndTheHeadApart) {
    const LayerRange r = parse_layer_range("0:29,output");
    EXPECT_EQ(r.begin, 0);
    EXPECT_EQ(r.end, 30);
    EXPECT_TRUE(r.has_embedding());
    EXPECT_TRUE(r.has_output(43));
    EXPECT_TRUE(r.head_apart(43));
    EXPECT_FALSE(r.head_follows_blocks(43));
    EXPECT_FALSE(r.has_last_block(43));
    EXPECT_FALSE(r.is_all());
    EXPECT_EQ(r.spelling(43), "0:29,output");
    EXPECT_EQ(r.spelling(), "0:29,output");
    EXPECT_EQ(r.resolved(43), parse_layer_range("0:29,output"));
    EXPECT_EQ(layer_range_problem(r, 43), "");
    EXPECT_EQ(layer_range_problem(r, 30), "");
    EXPECT_EQ(layer_range_problem(r, 20), "0:29,output is outside the model's 20 layers (0..19)");
    // Through the last block, ",output" is the same as ":output".
    const LayerRange tail = parse_layer_range("30:42,output");
    EXPECT_TRUE(tail.head_follows_blocks(43));
    EXPECT_FALSE(tail.head_apart(43));
    EXPECT_EQ(tail.spelling(43), "30:output");
    EXPECT_EQ(tail.resolved(43), parse_layer_range("30:output").resolved(43));
    EXPECT_NE(tail.resolved(43), parse_layer_range("30:42").resolved(43));
    // The last worker of that route: blocks only.
    const LayerRange last = parse_layer_range("30:42");
    EXPECT_FALSE(last.has_output(43));
    EXPECT_FALSE(last.head_follows_blocks(43));
    EXPECT_TRUE(last.has_last_block(43));
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
                            "-1:4", "3:OUTPUT", "output:3", "4:3", "99999999999:1", "1:99999999999", "0x1:2",
                            "output", ",output", "3,output", "3:4,output,output", "3:output,output", "3:4, output",
                            "3:4,OUTPUT", "3:4,out", "3:4output", "3:4,", ",output3:4", "4:3,output"}) {
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
        const bool apart = !out && rng() % 3 == 0;  // "A:B,output"
        std::string text = std::to_string(a) + ":" + (out ? std::string("output") : std::to_string(b)) +
                           (apart ? ",output" : "");
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
            EXPECT_EQ(r.has_output(n), out || apart) << text;
            EXPECT_EQ(r.head_apart(n), apart && b + 1 < n) << text;
            EXPECT_EQ(r.head_follows_blocks(n), out || (apart && b + 1 == n)) << text;
            EXPECT_EQ(parse_layer_range(r.spelling(n)).resolved(n), r.resolved(n)) << text;
        } else {
            EXPECT_NE(layer_range_problem(r, n), "") << text << " n=" << n;
        }
    }
}

}  // namespace
}  // namespace ds4

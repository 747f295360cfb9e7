// --layers: the two forms, their meaning as a block range, and the checks
// against a model's block count. Random slices are drawn fresh each run.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "cli/layers_spec.h"
#include "common/error.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

TEST(LayersSpec, InclusiveRange) {
    LayersSpec s = parse_layers_spec("3:9");
    EXPECT_EQ(s.first, 3);
    EXPECT_EQ(s.last, 9);
    EXPECT_FALSE(s.through_output);
    EXPECT_FALSE(s.has_embedding());
    EXPECT_FALSE(s.has_output());
    EXPECT_EQ(s.end_exclusive(48), 10);  // both ends inclusive
    EXPECT_EQ(s.to_string(), "3:9");
}

TEST(LayersSpec, ThroughOutput) {
    LayersSpec s = parse_layers_spec("24:output");
    EXPECT_TRUE(s.through_output);
    EXPECT_TRUE(s.has_output());
    EXPECT_EQ(s.end_exclusive(48), 48);
    EXPECT_EQ(s.to_string(), "24:output");
    EXPECT_TRUE(parse_layers_spec("0:output").has_embedding());
    EXPECT_TRUE(parse_layers_spec("0:0").has_embedding());
}

TEST(LayersSpec, Malformed) {
    for (const char* bad : {"", ":", "3", "3:", ":3", "a:3", "3:b", "3:4:5", "3-4", " 3:4", "3:4 ", "+3:4",
                            "-1:4", "3:OUTPUT", "output:3", "4:3", "99999999999:1", "1:99999999999", "0x1:2"}) {
        SCOPED_TRACE(bad);
        try {
            parse_layers_spec(bad);
            ADD_FAILURE() << "accepted";
        } catch (const UsageError& e) {
            std::string msg = e.what();
            EXPECT_EQ(msg.rfind("--layers", 0), 0u) << msg;
            EXPECT_EQ(msg.find('\n'), std::string::npos);
        }
    }
}

TEST(LayersSpec, AgainstModel) {
    EXPECT_NO_THROW(layers_spec_check_against_model(parse_layers_spec("0:47"), 48));
    EXPECT_NO_THROW(layers_spec_check_against_model(parse_layers_spec("47:output"), 48));
    EXPECT_THROW(layers_spec_check_against_model(parse_layers_spec("0:48"), 48), UsageError);
    EXPECT_THROW(layers_spec_check_against_model(parse_layers_spec("48:output"), 48), UsageError);
    try {
        layers_spec_check_against_model(parse_layers_spec("40:47"), 32);
        ADD_FAILURE();
    } catch (const UsageError& e) {
        EXPECT_STREQ(e.what(), "--layers 40:47 is outside the model's 32 layers (0..31)");
    }
}

TEST(LayersSpec, RandomRoundTrip) {
    const uint64_t seed = ds4::test::test_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 1000; ++i) {
        int a = std::uniform_int_distribution<int>(0, 200)(rng);
        int b = std::uniform_int_distribution<int>(0, 200)(rng);
        bool out = rng() % 4 == 0;
        std::string text = std::to_string(a) + ":" + (out ? std::string("output") : std::to_string(b));
        if (!out && a > b) {
            EXPECT_THROW(parse_layers_spec(text), UsageError) << text;
            continue;
        }
        LayersSpec s = parse_layers_spec(text);
        EXPECT_EQ(s.to_string(), text);
        int n = std::uniform_int_distribution<int>(1, 256)(rng);
        bool fits = a < n && (out || b < n);
        if (fits) {
            EXPECT_NO_THROW(layers_spec_check_against_model(s, n)) << text << " n=" << n;
            EXPECT_EQ(s.end_exclusive(n), out ? n : b + 1);
        } else {
            EXPECT_THROW(layers_spec_check_against_model(s, n), UsageError) << text << " n=" << n;
        }
    }
}

}  // namespace
}  // namespace ds4

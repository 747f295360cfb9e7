// Span coalescing and tensor selection, without files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>

#include "mapping/model_map.h"
#include "support/test_seed.h"

using namespace ds4;

namespace {

uint64_t fresh_seed() { return ds4::test::test_seed(); }

}  // namespace

TEST(MappingCoalesce, MaxGapIsPageOr64KiB) {
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    EXPECT_EQ(region_max_gap(), std::max<uint64_t>(page, 65536));
}

TEST(MappingCoalesce, GapAtTheLimitMergesOneMoreSplits) {
    const uint64_t g = 1000;
    auto r = coalesce_spans({{0, 100, 0}, {100 + g, 2000, 1}}, g);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].begin, 0u);
    EXPECT_EQ(r[0].end, 2000u);
    EXPECT_EQ(r[0].tensors, (std::vector<size_t>{0, 1}));

    r = coalesce_spans({{0, 100, 0}, {101 + g, 2000, 1}}, g);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].end, 100u);
    EXPECT_EQ(r[1].begin, 101 + g);
}

TEST(MappingCoalesce, SortsByOffsetSkipsEmptyAndListsTensorsByOffset) {
    // Given out of order, with empty spans that must not join anything: the
    // empty span at 5000 would otherwise bridge the two real ones.
    auto r = coalesce_spans({{9000, 9500, 7}, {5000, 5000, 3}, {0, 4000, 2}, {4000, 4000, 9}, {4010, 4020, 5}}, 600);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].begin, 0u);
    EXPECT_EQ(r[0].end, 4020u);
    EXPECT_EQ(r[0].tensors, (std::vector<size_t>{2, 5}));
    EXPECT_EQ(r[1].begin, 9000u);
    EXPECT_EQ(r[1].tensors, (std::vector<size_t>{7}));
    EXPECT_EQ(r[1].bytes(), 500u);

    EXPECT_TRUE(coalesce_spans({}, 10).empty());
    EXPECT_TRUE(coalesce_spans({{7, 7, 0}}, 10).empty());
}

TEST(MappingCoalesce, ZeroGapMergesOnlyTouchingSpans) {
    auto r = coalesce_spans({{0, 10, 0}, {10, 20, 1}, {21, 30, 2}}, 0);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].end, 20u);
    EXPECT_EQ(r[1].begin, 21u);
}

// Random spans against an independent answer: mark every covered byte, then
// walk the marks; a run of unmarked bytes longer than max_gap starts a new
// region. That is the fewest regions possible when no region may hold more
// than max_gap consecutive unwanted bytes.
TEST(MappingCoalesce, RandomLayoutsMatchByteMarking) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    for (int iter = 0; iter < 3000; ++iter) {
        SCOPED_TRACE("iteration " + std::to_string(iter));
        const uint64_t space = 1 + rng() % 5000;
        const uint64_t max_gap = rng() % 3 == 0 ? 0 : rng() % 200;
        const size_t n = rng() % 40;
        std::vector<Span> spans;
        std::vector<uint8_t> marked(space, 0);
        for (size_t i = 0; i < n; ++i) {
            const uint64_t b = rng() % space;
            const uint64_t len = rng() % 4 == 0 ? 0 : rng() % std::min<uint64_t>(space - b + 1, 300);
            spans.push_back(Span{b, b + len, i});
            for (uint64_t k = b; k < b + len; ++k) marked[k] = 1;
        }

        std::vector<std::pair<uint64_t, uint64_t>> expected;  // [first marked, last marked + 1]
        bool have = false;
        uint64_t last = 0;
        for (uint64_t p = 0; p < space; ++p) {
            if (!marked[p]) continue;
            if (!have || p - last - 1 > max_gap) expected.push_back({p, p + 1});
            expected.back().second = p + 1;
            have = true;
            last = p;
        }

        const auto regions = coalesce_spans(spans, max_gap);
        ASSERT_EQ(regions.size(), expected.size());
        std::multiset<size_t> listed;
        for (size_t r = 0; r < regions.size(); ++r) {
            EXPECT_EQ(regions[r].begin, expected[r].first);
            EXPECT_EQ(regions[r].end, expected[r].second);
            if (r > 0) EXPECT_GT(regions[r].begin - regions[r - 1].end, max_gap);
            uint64_t prev_begin = 0;
            for (size_t t : regions[r].tensors) {
                listed.insert(t);
                const Span& s = spans[t];
                EXPECT_GE(s.begin, regions[r].begin);
                EXPECT_LE(s.end, regions[r].end);
                EXPECT_GE(s.begin, prev_begin) << "tensors of a region are listed by offset";
                prev_begin = s.begin;
            }
        }
        for (const Span& s : spans) EXPECT_EQ(listed.count(s.tensor), s.end > s.begin ? 1u : 0u) << s.tensor;
    }
}

TEST(MappingRoles, LlamaCppNames) {
    struct Case {
        const char* name;
        TensorRole role;
        int layer;
    };
    const Case cases[] = {
        {"token_embd.weight", TensorRole::Embedding, -1},
        {"output_norm.weight", TensorRole::Output, -1},
        {"output.weight", TensorRole::Output, -1},
        {"output.scale", TensorRole::Output, -1},
        {"output_hc_fn.weight", TensorRole::Output, -1},
        {"rope_freqs.weight", TensorRole::NonRouted, -1},
        {"token_types", TensorRole::NonRouted, -1},
        {"token_embd_norm.weight", TensorRole::NonRouted, -1},
        {"outputs.weight", TensorRole::NonRouted, -1},
        {"blk.0.attn_norm.weight", TensorRole::NonRouted, 0},
        {"blk.61.ffn_gate_exps.weight", TensorRole::RoutedExperts, 61},
        {"blk.3.ffn_up_exps.weight", TensorRole::RoutedExperts, 3},
        {"blk.3.ffn_down_exps.weight", TensorRole::RoutedExperts, 3},
        {"blk.3.ffn_down_exps.scale", TensorRole::RoutedExperts, 3},
        {"blk.3.ffn_gate_up_exps.weight", TensorRole::RoutedExperts, 3},
        {"blk.3.ffn_up_exps.input_scale", TensorRole::RoutedExperts, 3},
        {"blk.3.ffn_norm_exps.weight", TensorRole::RoutedExperts, 3},
        {"blk.3.ffn_down_chexps.weight", TensorRole::RoutedExperts, 3},
        {"blk.3.ffn_gate_shexp.weight", TensorRole::NonRouted, 3},
        {"blk.3.ffn_gate_inp.weight", TensorRole::NonRouted, 3},
        {"blk.3.ffn_gate_inp_shexp.weight", TensorRole::NonRouted, 3},
        {"blk.3.exp_probs_b.bias", TensorRole::NonRouted, 3},
        {"blk.3.exp_probs_b_vl.bias", TensorRole::NonRouted, 3},
        {"blk.3.ffn_down.weight", TensorRole::NonRouted, 3},
        {"blk.3.attn_exps_like.weight", TensorRole::NonRouted, 3},  // experts live in the FFN
        {"blk.1234.attn_q.weight", TensorRole::NonRouted, 1234},
        // Not block names: no layer, treated as globals.
        {"blk.x.attn_q.weight", TensorRole::NonRouted, -1},
        {"blk.12", TensorRole::NonRouted, -1},
        {"blk.12.", TensorRole::NonRouted, 12},
        {"blk.-1.attn_q.weight", TensorRole::NonRouted, -1},
        {"blk.01.attn_q.weight", TensorRole::NonRouted, -1},
        {"blk.99999999999.attn_q.weight", TensorRole::NonRouted, -1},
        {"blk..attn_q.weight", TensorRole::NonRouted, -1},
        {"", TensorRole::NonRouted, -1},
    };
    for (const Case& c : cases) {
        EXPECT_EQ(tensor_role(c.name), c.role) << c.name;
        EXPECT_EQ(tensor_layer(c.name), c.layer) << c.name;
    }
}

TEST(MappingRoles, SelectionByRoleAndSlice) {
    MapSelection all;
    for (const char* n : {"token_embd.weight", "output.weight", "rope_freqs.weight", "blk.0.attn_q.weight",
                          "blk.900.ffn_up_exps.weight"})
        EXPECT_TRUE(all.selects(n)) << n;

    MapSelection mid;
    mid.layers.begin = 10;
    mid.layers.end = 20;
    mid.embedding = false;
    mid.output = false;
    EXPECT_FALSE(mid.selects("token_embd.weight"));
    EXPECT_FALSE(mid.selects("output_norm.weight"));
    EXPECT_TRUE(mid.selects("rope_freqs.weight"));  // globals go with every stage that runs layers
    EXPECT_FALSE(mid.selects("blk.9.attn_q.weight"));
    EXPECT_TRUE(mid.selects("blk.10.attn_q.weight"));
    EXPECT_TRUE(mid.selects("blk.19.ffn_gate_exps.weight"));
    EXPECT_FALSE(mid.selects("blk.20.attn_q.weight"));

    MapSelection experts = mid;
    experts.non_routed = false;
    EXPECT_TRUE(experts.selects("blk.15.ffn_down_exps.weight"));
    EXPECT_TRUE(experts.selects("blk.15.ffn_down_exps.scale"));
    EXPECT_FALSE(experts.selects("blk.15.ffn_down_shexp.weight"));
    EXPECT_FALSE(experts.selects("blk.15.attn_norm.weight"));
    EXPECT_FALSE(experts.selects("rope_freqs.weight"));
    EXPECT_FALSE(experts.selects("blk.25.ffn_down_exps.weight"));

    MapSelection dense = mid;
    dense.routed_experts = false;
    EXPECT_FALSE(dense.selects("blk.15.ffn_gate_up_exps.weight"));
    EXPECT_TRUE(dense.selects("blk.15.ffn_gate_inp.weight"));

    // A process with no layers (an empty slice) needs no globals.
    MapSelection head;
    head.layers.begin = 5;
    head.layers.end = 5;
    head.embedding = false;
    EXPECT_TRUE(head.selects("output.weight"));
    EXPECT_FALSE(head.selects("rope_freqs.weight"));
    EXPECT_FALSE(head.selects("blk.5.attn_q.weight"));

    MapSelection tail;
    tail.layers.begin = 30;  // layer_end -1: through the last layer
    EXPECT_FALSE(tail.selects("blk.29.attn_q.weight"));
    EXPECT_TRUE(tail.selects("blk.30.attn_q.weight"));
    EXPECT_TRUE(tail.selects("blk.100000.attn_q.weight"));
}

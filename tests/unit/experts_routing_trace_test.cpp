// The routing trace file (--ssd-streaming-trace-out, ds4-trace): random
// traces come back exactly through the text and through a file; a file is
// accepted only when it is exactly what the formatter writes, so any damage
// (cut short anywhere, random bytes changed, inserted or removed) is either
// refused with one sentence or is another well-formed trace; the streaming
// writer a run uses gives the same file, and one never finished is refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <algorithm>
#include <string>

#include "common/error.h"
#include "experts/routing_trace.h"
#include "experts/routing_trace_synth.h"
#include "experts/routing_trace_writer.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

namespace fs = std::filesystem;

struct TempPath {
    explicit TempPath(std::mt19937_64& rng)
        : path((fs::temp_directory_path() / ("ds4-trace-" + std::to_string(rng()))).string()) {}
    ~TempPath() { fs::remove(path); }
    std::string path;
};

RoutingTrace random_trace(std::mt19937_64& rng) {
    RoutingTrace t;
    t.source = "test trace " + std::to_string(rng() % 1000);
    t.experts_per_token = 1 + int64_t(rng() % 8);
    const int n_blocks = 1 + int(rng() % 6);
    int layer = int(rng() % 3);
    for (int b = 0; b < n_blocks; ++b) {
        t.blocks.push_back(PolicyBlock{layer, t.experts_per_token + int64_t(rng() % 300)});
        layer += 1 + int(rng() % 4);
    }
    const int n_routes = int(rng() % 200);
    for (int r = 0; r < n_routes; ++r) {
        const PolicyBlock& b = t.blocks[rng() % t.blocks.size()];
        const int64_t rows = rng() % 5 == 0 ? 1 + int64_t(rng() % 40) : 1;
        t.routes.push_back(TraceRoute{b.layer, rows, t.ids.size()});
        for (int64_t i = 0; i < rows * t.experts_per_token; ++i) t.ids.push_back(int32_t(rng() % uint64_t(b.n_expert)));
    }
    return t;
}

void expect_same(const RoutingTrace& a, const RoutingTrace& b) {
    EXPECT_EQ(a.source, b.source);
    EXPECT_EQ(a.experts_per_token, b.experts_per_token);
    ASSERT_EQ(a.blocks.size(), b.blocks.size());
    for (size_t i = 0; i < a.blocks.size(); ++i) {
        EXPECT_EQ(a.blocks[i].layer, b.blocks[i].layer);
        EXPECT_EQ(a.blocks[i].n_expert, b.blocks[i].n_expert);
    }
    ASSERT_EQ(a.routes.size(), b.routes.size());
    for (size_t i = 0; i < a.routes.size(); ++i) {
        EXPECT_EQ(a.routes[i].layer, b.routes[i].layer);
        EXPECT_EQ(a.routes[i].rows, b.routes[i].rows);
        EXPECT_EQ(a.route_ids(i), b.route_ids(i));
    }
}

// One sentence: names the file, ends with a full stop, one line.
void expect_sentence(const std::string& what, const std::string& name) {
    EXPECT_NE(what.find("the routing trace " + name), std::string::npos) << what;
    EXPECT_EQ(what.back(), '.') << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
}

TEST(RoutingTrace, RandomTracesRoundTripThroughTextAndFile) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 50; ++i) {
        const RoutingTrace t = random_trace(rng);
        const std::string text = format_routing_trace(t);
        expect_same(t, parse_routing_trace(text, "x"));
        TempPath p(rng);
        write_routing_trace(p.path, t);
        expect_same(t, read_routing_trace(p.path));
    }
}

TEST(RoutingTrace, EveryCutShortFileIsRefused) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const std::string text = format_routing_trace(random_trace(rng));
    for (size_t n = 0; n < text.size(); ++n) {
        try {
            parse_routing_trace(text.substr(0, n), "cut");
            ADD_FAILURE() << "a trace cut to " << n << " of " << text.size() << " bytes was accepted";
        } catch (const Error& e) {
            expect_sentence(e.what(), "cut");
        }
    }
}

TEST(RoutingTrace, RandomDamageIsRefusedOrIsAnotherWellFormedTrace) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const char alphabet[] = "0123456789 \nroutebklndsx-\r\t\xff";
    int refused = 0;
    for (int i = 0; i < 3000; ++i) {
        std::string text = format_routing_trace(random_trace(rng));
        const int edits = 1 + int(rng() % 3);
        for (int k = 0; k < edits && !text.empty(); ++k) {
            const size_t at = rng() % text.size();
            const char c = alphabet[rng() % (sizeof alphabet - 1)];
            switch (rng() % 3) {
                case 0: text[at] = c; break;
                case 1: text.insert(text.begin() + std::ptrdiff_t(at), c); break;
                default: text.erase(at, 1 + rng() % 4); break;
            }
        }
        try {
            const RoutingTrace t = parse_routing_trace(text, "damaged");
            // Accepted: then it is exactly what the formatter writes for it
            // (no second spelling of any trace exists).
            EXPECT_EQ(format_routing_trace(t), text);
        } catch (const Error& e) {
            expect_sentence(e.what(), "damaged");
            ++refused;
        }
    }
    EXPECT_GT(refused, 2000);  // most damage cannot spell a trace
}

TEST(RoutingTrace, NamedDefectsAreRefused) {
    const std::string ok =
        "ds4-routing-trace 1\nsource s\nexperts-per-token 2\nblock 0 4\nblock 3 8\nroute 0 1 1 2\nroute 3 2 7 0 1 1\nend 2\n";
    EXPECT_NO_THROW(parse_routing_trace(ok, "ok"));
    const std::pair<std::string, std::string> bad[] = {
        {"", "empty"},
        {"ds4-routing-trace 2\n", "version"},
        {"ds4-routing-profile 2\n", "not a routing trace"},
        {"ds4-routing-trace 1\nsource \nexperts-per-token 2\nend 0\n", "source"},
        {"ds4-routing-trace 1\nsource s\nexperts-per-token 0\nend 0\n", "experts-per-token"},
        {"ds4-routing-trace 1\nsource s\nexperts-per-token 02\nend 0\n", "experts-per-token"},
        {"ds4-routing-trace 1\nsource s\nexperts-per-token 2\nblock 3 8\nblock 3 8\nend 0\n", "ascend"},
        {"ds4-routing-trace 1\nsource s\nexperts-per-token 2\nblock 0 4\nroute 1 1 0 1\nend 1\n", "no block line"},
        {"ds4-routing-trace 1\nsource s\nexperts-per-token 2\nblock 0 4\nroute 0 1 0 4\nend 1\n", "not an expert"},
        {"ds4-routing-trace 1\nsource s\nexperts-per-token 2\nblock 0 4\nroute 0 1 0\nend 1\n", "fewer"},
        {"ds4-routing-trace 1\nsource s\nexperts-per-token 2\nblock 0 4\nroute 0 1 0 1 2\nend 1\n", "more than"},
        {"ds4-routing-trace 1\nsource s\nexperts-per-token 2\nblock 0 4\nroute 0 1 0 1\nend 2\n", "counts 2"},
        {"ds4-routing-trace 1\nsource s\nexperts-per-token 2\nblock 0 4\nroute 0 1 0 1\nend 1\nx\n", "after the 'end'"},
        {"ds4-routing-trace 1\nsource s\nexperts-per-token 2\nblock 0 4\nroute 0 1 0 1\r\nend 1\n", "line 5"},
        {"ds4-routing-trace 1\nsource s\nexperts-per-token 2\nblock 0 4\nroute 0 1 0 1\n", "cut short"},
        {"ds4-routing-trace 1\nsource s\nexperts-per-token 2\nblock 0 4\nroute 0 1 0 1\nblock 5 4\nend 1\n", "after the first route"},
    };
    for (const auto& [text, why] : bad) {
        try {
            parse_routing_trace(text, "t");
            ADD_FAILURE() << "accepted: " << text;
        } catch (const Error& e) {
            expect_sentence(e.what(), "t");
            EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
        }
    }
}

TEST(RoutingTrace, TheWriterARunUsesGivesTheSameFileAndAnUnfinishedOneIsRefused) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const RoutingTrace t = random_trace(rng);
    TempPath p(rng);
    {
        RoutingTraceWriter w(p.path, t.source, t.blocks, t.experts_per_token);
        for (size_t r = 0; r < t.routes.size(); ++r)
            w.record(t.routes[r].layer, t.routes[r].rows, t.experts_per_token, t.route_ids(r));
        EXPECT_THROW(w.record(t.blocks[0].layer, 1, t.experts_per_token + 1,
                              std::vector<int32_t>(size_t(t.experts_per_token + 1), 0)),
                     Error);
        w.finish();
        w.finish();  // once only
    }
    expect_same(t, read_routing_trace(p.path));
    {
        RoutingTraceWriter w(p.path, t.source, t.blocks, t.experts_per_token);
        if (!t.routes.empty()) w.record(t.routes[0].layer, t.routes[0].rows, t.experts_per_token, t.route_ids(0));
    }  // a run that died: no trailer
    try {
        read_routing_trace(p.path);
        ADD_FAILURE() << "an unfinished trace was accepted";
    } catch (const Error& e) {
        expect_sentence(e.what(), p.path);
    }
    EXPECT_THROW(RoutingTraceWriter(p.path + "/no/such/dir", t.source, t.blocks, 1), Error);
}

TEST(RoutingTraceSynth, ShapeDistinctChoicesAndSkew) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const TraceShape shape{3 + int64_t(rng() % 4), 16 + int64_t(rng() % 64), 2 + int64_t(rng() % 6)};
    const uint64_t tokens = 400;
    // The share of the single most routed expert of each block: near
    // K/E when uniform, far above it under Zipf(1.2).
    auto top_share = [&](double s) {
        const RoutingTrace t = zipf_routing_trace(shape, tokens, s, rng());
        EXPECT_EQ(t.tokens(), tokens);
        EXPECT_EQ(t.routes.size(), tokens * uint64_t(shape.blocks));
        EXPECT_EQ(parse_routing_trace(format_routing_trace(t), "g").routes.size(), t.routes.size());
        std::vector<std::vector<uint64_t>> count(size_t(shape.blocks), std::vector<uint64_t>(size_t(shape.experts)));
        for (size_t r = 0; r < t.routes.size(); ++r) {
            std::vector<int32_t> ids = t.route_ids(r);
            std::sort(ids.begin(), ids.end());
            EXPECT_EQ(std::unique(ids.begin(), ids.end()), ids.end()) << "a token chose an expert twice";
            for (int32_t e : ids) {
                EXPECT_GE(e, 0);
                EXPECT_LT(e, shape.experts);
                ++count[size_t(t.routes[r].layer)][size_t(e)];
            }
        }
        double share = 0;
        for (const auto& c : count) share += double(*std::max_element(c.begin(), c.end())) / double(tokens);
        return share / double(shape.blocks);
    };
    const double uniform = top_share(0);
    const double zipf = top_share(1.2);
    const double k_over_e = double(shape.experts_per_token) / double(shape.experts);
    EXPECT_LT(uniform, k_over_e + 0.15);
    EXPECT_GT(zipf, std::min(0.95, k_over_e + 0.3));
    EXPECT_THROW(zipf_routing_trace(TraceShape{1, 4, 5}, 1, 1, 1), Error);
    EXPECT_THROW(zipf_routing_trace(TraceShape{1, 4, 2}, 1, -1, 1), Error);
}

}  // namespace
}  // namespace ds4

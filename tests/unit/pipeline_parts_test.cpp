// The pipeline's parts on their own: the route table (coverage, doubled and
// missing blocks, heartbeats going stale, a restarted worker replacing its
// entry, overlaps refused), activations on the wire (f32 exact, f16 and
// 8-bit within their rounding, malformed messages refused), the cluster
// key's tokens and the token history's prefix hashes. Inputs are drawn
// fresh each run.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/error.h"
#include "engine/token_history.h"
#include "pipeline/activations.h"
#include "pipeline/cluster_key.h"
#include "pipeline/route.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

wire::Registration worker(const std::string& id, int begin, int end, int n_layer) {
    wire::Registration r;
    r.set_worker_id(id);
    r.set_address("127.0.0.1:" + std::to_string(9000 + begin));
    r.mutable_slice()->set_begin(begin);
    r.mutable_slice()->set_end(end);
    r.mutable_slice()->set_output(end == n_layer);
    return r;
}

TEST(PipelineRoute, CoversEveryBlockOnceInOrder) {
    RouteTable t(12, 4);
    EXPECT_NE(t.problem().find("no worker serves blocks 4..11"), std::string::npos) << t.problem();
    EXPECT_EQ(t.add(worker("b", 8, 12, 12)), "");
    EXPECT_NE(t.problem().find("no worker serves blocks 4..7"), std::string::npos) << t.problem();
    EXPECT_THROW(t.hops(), Error);
    EXPECT_EQ(t.add(worker("a", 4, 8, 12)), "");
    EXPECT_EQ(t.problem(), "");
    const auto hops = t.hops();
    ASSERT_EQ(hops.size(), 2u);
    EXPECT_EQ(hops[0].slice().begin(), 4);
    EXPECT_EQ(hops[1].slice().begin(), 8);
    EXPECT_TRUE(hops[1].slice().output());
}

TEST(PipelineRoute, GapsOverlapsAndTheHead) {
    RouteTable t(10, 2);
    EXPECT_EQ(t.add(worker("a", 2, 4, 10)), "");
    EXPECT_EQ(t.add(worker("c", 6, 10, 10)), "");
    EXPECT_NE(t.problem().find("no worker serves blocks 4..5"), std::string::npos) << t.problem();
    // Overlapping a live worker is refused and names it.
    const std::string why = t.add(worker("d", 3, 6, 10));
    EXPECT_NE(why.find("overlap"), std::string::npos) << why;
    EXPECT_NE(why.find("127.0.0.1:9002"), std::string::npos) << why;
    // Inside the coordinator's own blocks, or outside the model.
    EXPECT_NE(t.add(worker("e", 1, 3, 10)).find("coordinator"), std::string::npos);
    EXPECT_NE(t.add(worker("f", 8, 11, 10)), "");
}

// The head exactly once: on the last worker or on the coordinator; both or
// neither is refused at registration with the spellings that fix it.
TEST(PipelineRoute, TheHeadOnTheLastWorkerOrTheCoordinator) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937 rng(static_cast<uint32_t>(seed));
    for (int i = 0; i < 200; ++i) {
        const int n = 2 + static_cast<int>(rng() % 60), cut = 1 + static_cast<int>(rng() % uint32_t(n - 1));
        const bool coordinator_head = rng() % 2, worker_head = rng() % 2;
        SCOPED_TRACE("n_layer " + std::to_string(n) + ", coordinator 0:" + std::to_string(cut - 1) +
                     (coordinator_head ? ",output" : "") + ", worker head " + std::to_string(worker_head));
        RouteTable t(n, cut, coordinator_head);
        wire::Registration r = worker("w", cut, n, n);
        r.mutable_slice()->set_output(worker_head);
        const std::string why = t.add(r);
        const std::string mine = "0:" + std::to_string(cut - 1), theirs = std::to_string(cut) + ":";
        if (coordinator_head != worker_head) {
            EXPECT_EQ(why, "");
            EXPECT_EQ(t.problem(), "");
            ASSERT_EQ(t.hops().size(), 1u);
            EXPECT_EQ(t.hops()[0].slice().output(), worker_head);
        } else if (worker_head) {  // both
            EXPECT_NE(why.find("and so does this coordinator (--layers " + mine + ",output)"), std::string::npos) << why;
            EXPECT_NE(why.find("--layers " + theirs + std::to_string(n - 1) + ","), std::string::npos) << why;
            EXPECT_NE(t.problem().find("no worker serves"), std::string::npos);
        } else {  // neither
            EXPECT_NE(why.find("without the output head"), std::string::npos) << why;
            EXPECT_NE(why.find("--layers " + theirs + "output"), std::string::npos) << why;
            EXPECT_NE(why.find("--layers " + mine + ",output."), std::string::npos) << why;
        }
        EXPECT_EQ(why.find('\n'), std::string::npos);
    }
    // A middle worker never holds the head.
    RouteTable t(10, 2, true);
    wire::Registration mid = worker("m", 2, 6, 10);
    mid.mutable_slice()->set_output(true);
    EXPECT_NE(t.add(mid).find("without the model's last block 9"), std::string::npos) << t.add(mid);
}

TEST(PipelineRoute, HeartbeatsRestartsAndStaleWorkers) {
    using C = RouteTable::Clock;
    const C::time_point t0 = C::now();
    RouteTable t(8, 2);
    EXPECT_EQ(t.add(worker("a", 2, 5, 8), t0), "");
    EXPECT_EQ(t.add(worker("b", 5, 8, 8), t0), "");
    EXPECT_EQ(t.problem(t0 + std::chrono::seconds(1)), "");
    // b keeps beating, a falls silent: its blocks go missing.
    EXPECT_EQ(t.add(worker("b", 5, 8, 8), t0 + std::chrono::seconds(4)), "");
    const std::string p = t.problem(t0 + std::chrono::seconds(7));
    EXPECT_NE(p.find("blocks 2..4"), std::string::npos) << p;
    // A restarted a (new id, same slice) takes its place at once.
    wire::Registration again = worker("a2", 2, 5, 8);
    again.set_address("127.0.0.1:7777");
    EXPECT_EQ(t.add(again, t0 + std::chrono::seconds(7)), "");
    const auto hops = t.hops(t0 + std::chrono::seconds(8));
    ASSERT_EQ(hops.size(), 2u);
    EXPECT_EQ(hops[0].address(), "127.0.0.1:7777");
    // Even while the old entry is still fresh.
    EXPECT_EQ(t.add(worker("b2", 5, 8, 8), t0 + std::chrono::seconds(8)), "");
    EXPECT_EQ(t.hops(t0 + std::chrono::seconds(8)).size(), 2u);
}

std::vector<float> random_rows(std::mt19937& rng, int64_t rows, int64_t cols) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::uniform_real_distribution<float> mag(-4, 3);  // f16 holds up to 65504
    std::vector<float> v(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
        const float scale = std::pow(10.0f, mag(rng));  // rows differ by orders of magnitude
        for (int64_t c = 0; c < cols; ++c) v[static_cast<size_t>(r * cols + c)] = scale * d(rng);
    }
    return v;
}

TEST(PipelineActivations, RoundTripWithinEachFormatsRounding) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937 rng(static_cast<uint32_t>(seed));
    const int64_t rows = 1 + rng() % 9, cols = 1 + rng() % 700;
    const std::vector<float> x = random_rows(rng, rows, cols);
    for (int bits : {32, 16, 8}) {
        wire::Activations a;
        encode_activations(x, rows, cols, bits, a);
        EXPECT_EQ(activation_bytes(a),
                  static_cast<uint64_t>(rows * cols * bits / 8 + (bits == 8 ? rows * ((cols + 63) / 64) * 4 : 0)));
        const std::vector<float> y = decode_activations(a);
        ASSERT_EQ(y.size(), x.size());
        for (int64_t r = 0; r < rows; ++r) {
            for (int64_t c = 0; c < cols; ++c) {
                // 8-bit: half a step of the value's block of 64 in its row.
                float amax = 0;
                for (int64_t j = c / 64 * 64; j < std::min(cols, c / 64 * 64 + 64); ++j)
                    amax = std::max(amax, std::fabs(x[size_t(r * cols + j)]));
                const float a0 = x[size_t(r * cols + c)], b0 = y[size_t(r * cols + c)];
                if (bits == 32) {
                    ASSERT_EQ(a0, b0);
                } else if (bits == 16) {
                    // Half precision: relative 2^-11, or the subnormal step for tiny values.
                    ASSERT_LE(std::fabs(a0 - b0), std::max(std::fabs(a0) * 4.9e-4f, 6.0e-8f)) << a0;
                } else {
                    ASSERT_LE(std::fabs(a0 - b0), amax / 254.0f * 1.0001f) << a0 << " block max " << amax;
                }
            }
        }
    }
}

TEST(PipelineActivations, MalformedMessagesAreRefused) {
    std::vector<float> x(12, 1.5f);
    wire::Activations a;
    encode_activations(x, 3, 4, 16, a);
    wire::Activations bad = a;
    bad.set_rows(4);
    EXPECT_THROW(decode_activations(bad), Error);
    bad = a;
    bad.set_bits(12);
    EXPECT_THROW(decode_activations(bad), Error);
    bad = a;
    bad.mutable_data()->pop_back();
    EXPECT_THROW(decode_activations(bad), Error);
    encode_activations(x, 3, 4, 8, a);
    bad = a;
    bad.clear_scales();
    EXPECT_THROW(decode_activations(bad), Error);
    bad = a;
    bad.set_rows(int64_t{1} << 40);
    bad.set_cols(int64_t{1} << 40);
    EXPECT_THROW(decode_activations(bad), Error);
    EXPECT_THROW(encode_activations(x, 5, 4, 32, a), Error);
    EXPECT_THROW(encode_activations(x, 3, 4, 4, a), Error);
    // f16 cannot hold it: a sentence, not an infinity in the next stage.
    x[5] = 70000.0f;
    EXPECT_THROW(encode_activations(x, 3, 4, 16, a), Error);
    x[5] = std::nanf("");
    EXPECT_THROW(encode_activations(x, 3, 4, 8, a), Error);
}

TEST(PipelineClusterKey, TokensVerifyOnlyWithTheKeyAndMethod) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const std::string secret = "k" + std::to_string(rng()) + std::to_string(rng());
    const ClusterKey key(secret), other(secret + "x");
    const std::string tok = key.token("Forward");
    EXPECT_TRUE(key.verify(tok, "Forward"));
    EXPECT_FALSE(key.verify(tok, "Register"));
    EXPECT_FALSE(other.verify(tok, "Forward"));
    std::string tampered = tok;
    tampered.back() = tampered.back() == '0' ? '1' : '0';
    EXPECT_FALSE(key.verify(tampered, "Forward"));
    // An old timestamp (replayed long after) fails even with a valid shape.
    EXPECT_FALSE(key.verify("1000." + tok.substr(tok.find('.') + 1), "Forward"));
    EXPECT_FALSE(key.verify("", "Forward"));
    EXPECT_FALSE(key.verify("abc.def", "Forward"));
    // The token never contains the key.
    EXPECT_EQ(tok.find(secret), std::string::npos);
}

TEST(PipelineClusterKey, ShortKeysAreRefused) {
    ::setenv("DS4_CLUSTER_KEY", "  short  ", 1);
    EXPECT_THROW(ClusterKey::load(""), Error);
    ::setenv("DS4_CLUSTER_KEY", "0123456789abcdef", 1);
    EXPECT_TRUE(ClusterKey::load("").has_value());
    ::unsetenv("DS4_CLUSTER_KEY");
    EXPECT_FALSE(ClusterKey::load("").has_value());
    EXPECT_THROW(ClusterKey::load("/nonexistent/ds4-key"), Error);
}

TEST(PipelineTokenHistory, PrefixHashesFollowTheTokens) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::vector<int32_t> toks(200);
    for (auto& t : toks) t = static_cast<int32_t>(rng() % 1000);
    TokenHistory a, b;
    a.append(toks);
    b.append(std::span<const int32_t>(toks).subspan(0, 73));
    b.append(std::span<const int32_t>(toks).subspan(73));
    for (int64_t n : {0, 1, 73, 199, 200}) EXPECT_EQ(a.prefix_hash(n), b.prefix_hash(n));
    EXPECT_EQ(a.prefix_hash(0), TokenHistory::kEmpty);
    EXPECT_EQ(TokenHistory::extend(TokenHistory::kEmpty, toks), a.prefix_hash(200));
    // One token changed: every prefix from it on hashes differently.
    const size_t at = rng() % toks.size();
    std::vector<int32_t> changed = toks;
    changed[at] += 1;
    TokenHistory c;
    c.append(changed);
    EXPECT_EQ(c.prefix_hash(static_cast<int64_t>(at)), a.prefix_hash(static_cast<int64_t>(at)));
    for (int64_t n = static_cast<int64_t>(at) + 1; n <= 200; ++n) ASSERT_NE(c.prefix_hash(n), a.prefix_hash(n)) << n;
    // Truncation then other tokens: the hashes of the new tokens.
    a.truncate(static_cast<int64_t>(at));
    a.append(std::span<const int32_t>(changed).subspan(at));
    EXPECT_EQ(a.prefix_hash(200), c.prefix_hash(200));
}

}  // namespace
}  // namespace ds4

// Session state properties on models from llama.cpp's generator (fresh seed
// each run): a snapshot restores the session exactly, rewinding is allowed
// only where the model's caches can resume, and reset starts clean. These
// are self-consistency checks of the session machinery; the logits
// themselves are checked against llama.cpp in models_*_test.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <span>

#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/family.h"
#include "oracle_harness.h"
#include "support/loaded_model.h"
#include "engine/prefix_cache.h"
#include "engine/session.h"

namespace ds4 {
namespace {

using namespace oracle;

struct Loaded : ds4::test::LoadedModel {
    explicit Loaded(ds4::test::LoadedModel l) : ds4::test::LoadedModel(std::move(l)) {}
    std::unique_ptr<Backend> backend = make_cpu_backend(2);
};

Loaded load(const fs::path& path) { return Loaded(ds4::test::load_whole_model(path.string())); }

fs::path make_model(const std::string& arch, uint64_t seed, const TempDir& dir) {
    const fs::path raw = generate_arch_model(arch, model_seed(seed), dir.path());
    // GLM-5: grouped routing and an indexer top-k (32) the prompts pass.
    if (arch == "glm-dsa") return glm_rewrite(raw, dir / "glm.gguf", GlmRewrite{}, model_seed(seed));
    if (arch != "deepseek4") return raw;
    // Make routing, hash layers and the indexer matter (the generator's
    // defaults route every token to every expert).
    Dsv4Rewrite r;
    return dsv4_rewrite(raw, dir / "dsv4.gguf", r, model_seed(seed));
}

class SessionState : public ::testing::TestWithParam<std::string> {};

TEST_P(SessionState, SnapshotRestoreContinuesExactly) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    TempDir dir;
    Loaded m = load(make_model(GetParam(), seed, dir));
    std::mt19937_64 rng(seed);
    const auto V = static_cast<int32_t>(m.model->info().n_vocab);
    const auto prefix = random_token_ids(rng, 20 + rng() % 60, V);
    const auto next = random_token_ids(rng, 1 + rng() % 20, V);
    const auto junk = random_token_ids(rng, 1 + rng() % 40, V);

    SessionOptions so;
    so.n_ctx = 256;
    so.prefill_chunk = 1 + static_cast<int64_t>(rng() % 16);
    Session s(*m.model, *m.backend, so);
    s.eval(prefix, false);
    const SessionSnapshot snap = s.snapshot();
    EXPECT_EQ(snap.n_past(), static_cast<int64_t>(prefix.size()));
    EXPECT_GT(snap.bytes(), 0u);
    // Only what the prefix wrote is copied: under the whole state of 256
    // positions (Qwen3-MoE and GLM-5's latent caches: the prefix's share of it exactly).
    EXPECT_LT(snap.bytes(), s.state_bytes());
    if (GetParam() != "deepseek4") EXPECT_EQ(snap.bytes() * 256, s.state_bytes() * prefix.size());
    const auto want = s.eval(next, true);

    s.eval(junk, false);
    s.restore(snap);
    EXPECT_EQ(s.n_past(), static_cast<int64_t>(prefix.size()));
    const auto got = s.eval(next, true);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
        << "logits after restore differ from those before the detour";
}

TEST_P(SessionState, RewindOnlyWhereTheCachesCanResume) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    TempDir dir;
    Loaded m = load(make_model(GetParam(), seed, dir));
    std::mt19937_64 rng(seed ^ 0x5eed);
    const auto V = static_cast<int32_t>(m.model->info().n_vocab);
    const auto prefix = random_token_ids(rng, 30, V);
    const auto next = random_token_ids(rng, 5, V);
    const auto other = random_token_ids(rng, 7, V);

    SessionOptions so;
    so.n_ctx = 128;
    Session straight(*m.model, *m.backend, so);
    straight.eval(prefix, false);
    const auto want = straight.eval(next, true);

    Session s(*m.model, *m.backend, so);
    s.eval(prefix, false);
    s.eval(other, false);
    EXPECT_FALSE(s.try_rewind(s.n_past() + 1));
    EXPECT_TRUE(s.try_rewind(s.n_past()));  // resuming where the cache ends always works
    const bool rewound = s.try_rewind(static_cast<int64_t>(prefix.size()));
    if (GetParam() == "deepseek4") {
        // Ring caches: positions past the prefix overwrote what it needs.
        EXPECT_FALSE(rewound);
        EXPECT_EQ(s.n_past(), static_cast<int64_t>(prefix.size() + other.size()));
        s.reset();
        EXPECT_EQ(s.n_past(), 0);
        s.eval(prefix, false);
    } else {
        EXPECT_TRUE(rewound);
    }
    const auto got = s.eval(next, true);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
}

// Prefix reuse (Session::reuse_prefix): a follow-up prompt keeps what the
// session holds of it, evaluates the rest, and gives the logits a fresh
// session gives the whole prompt; a prompt that leaves the held tokens
// starts over where the caches cannot rewind. The session's token list
// follows every step, snapshots included.
TEST_P(SessionState, ReusePrefixKeepsWhatTheCacheHolds) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    TempDir dir;
    Loaded m = load(make_model(GetParam(), seed, dir));
    std::mt19937_64 rng(seed ^ 0x9e3779b9);
    const auto V = static_cast<int32_t>(m.model->info().n_vocab);
    const auto turn1 = random_token_ids(rng, 20 + rng() % 30, V);
    auto turn2 = turn1;  // the next turn's prompt extends the first
    const auto more = random_token_ids(rng, 3 + rng() % 10, V);
    turn2.insert(turn2.end(), more.begin(), more.end());
    SessionOptions so;
    so.n_ctx = 160;

    auto fresh_last_row = [&](const std::vector<int32_t>& prompt) {
        Session f(*m.model, *m.backend, so);
        return f.eval(prompt, false);
    };

    Session s(*m.model, *m.backend, so);
    EXPECT_EQ(s.reuse_prefix(turn1), 0);
    s.eval(turn1, false);
    EXPECT_EQ(s.tokens(), turn1);
    const int64_t kept = s.reuse_prefix(turn2);
    EXPECT_EQ(kept, static_cast<int64_t>(turn1.size()));
    const auto got = s.eval(std::span<const int32_t>(turn2).subspan(size_t(kept)), false);
    EXPECT_EQ(s.tokens(), turn2);
    EXPECT_EQ(got, fresh_last_row(turn2));

    // The same prompt again: all but its last token could be kept, so there
    // are logits to return; ring caches cannot step back that one token.
    const int64_t again = s.reuse_prefix(turn2);
    EXPECT_EQ(again, GetParam() == "deepseek4" ? 0 : static_cast<int64_t>(turn2.size()) - 1);
    EXPECT_EQ(s.eval(std::span<const int32_t>(turn2).subspan(size_t(again)), false), fresh_last_row(turn2));

    // A prompt that leaves the held tokens after position k.
    const size_t k = 1 + rng() % (turn1.size() - 1);
    std::vector<int32_t> branch(turn1.begin(), turn1.begin() + ptrdiff_t(k));
    const auto tail = random_token_ids(rng, 5, V);
    branch.insert(branch.end(), tail.begin(), tail.end());
    const int64_t kept2 = s.reuse_prefix(branch);
    if (GetParam() == "deepseek4") {
        EXPECT_EQ(kept2, 0) << "ring caches cannot rewind: the session starts over";
        EXPECT_EQ(s.n_past(), 0);
    } else {
        EXPECT_GE(kept2, static_cast<int64_t>(k));
    }
    EXPECT_EQ(s.eval(std::span<const int32_t>(branch).subspan(size_t(kept2)), false), fresh_last_row(branch));

    // Snapshots carry the token list.
    const SessionSnapshot snap = s.snapshot();
    EXPECT_EQ(snap.tokens, branch);
    s.reset();
    EXPECT_TRUE(s.tokens().empty());
    s.restore(snap);
    EXPECT_EQ(s.tokens(), branch);
}

// A prefix cache: the snapshot of a prompt's state resumes a later prompt
// that starts with it but leaves the live sequence inside what followed (a
// chat template that re-renders the last reply differently). DeepSeek V4's
// rings cannot rewind there, so the snapshot turns a full re-prefill into
// the new tokens only, with the logits of a fresh session bit for bit; for
// Qwen3-MoE the live cache rewinds as far, and the cache is not consulted.
// The byte budget holds: a snapshot larger than it is not kept, and older
// ones are evicted first.
TEST_P(SessionState, PrefixCacheResumesWhereTheLiveSequenceCannot) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    TempDir dir;
    Loaded m = load(make_model(GetParam(), seed, dir));
    std::mt19937_64 rng(seed ^ 0x51ed27);
    const auto V = static_cast<int32_t>(m.model->info().n_vocab);
    const auto prompt = random_token_ids(rng, 20 + rng() % 40, V);
    auto reply = random_token_ids(rng, 4 + rng() % 8, V);
    auto other = random_token_ids(rng, 4 + rng() % 8, V);
    other[0] = (reply[0] + 1) % V;  // leaves the live sequence right after the prompt
    SessionOptions so;
    so.n_ctx = 160;
    so.prefill_chunk = 1 + int64_t(rng() % 16);

    Session s(*m.model, *m.backend, so);
    PrefixCache cache(uint64_t(1) << 30);
    s.eval(prompt, false);
    cache.store(s);
    EXPECT_EQ(cache.size(), 1u);
    s.eval(reply, false);

    std::vector<int32_t> next = prompt;
    next.insert(next.end(), other.begin(), other.end());
    const int64_t kept = s.reuse_prefix(next, &cache);
    EXPECT_EQ(kept, int64_t(prompt.size()));
    EXPECT_EQ(cache.stats().hits, GetParam() == "deepseek4" ? 1u : 0u);
    const auto got = s.eval(std::span<const int32_t>(next).subspan(size_t(kept)), false);
    Session fresh(*m.model, *m.backend, so);
    EXPECT_EQ(got, fresh.eval(next, false));
    EXPECT_EQ(s.tokens(), next);

    // Budgets: one snapshot's bytes hold one entry; a smaller budget none.
    // A longer sequence's snapshot is larger (it copies what its positions wrote).
    const uint64_t one = s.snapshot().bytes();
    PrefixCache small(one - 1);
    small.store(s);
    EXPECT_EQ(small.size(), 0u);
    Session longer(*m.model, *m.backend, so);
    longer.eval(next, false);
    longer.eval(reply, false);
    const uint64_t two = longer.snapshot().bytes();
    EXPECT_GT(two, one);
    PrefixCache single(two);
    single.store(fresh);  // holds `next` too, same size
    single.store(s);      // the same tokens: replaces
    EXPECT_EQ(single.size(), 1u);
    single.store(longer);  // another entry: the older one goes
    EXPECT_EQ(single.size(), 1u);
    EXPECT_EQ(single.stats().evictions, 1u);
    EXPECT_LE(single.bytes(), two);
}

INSTANTIATE_TEST_SUITE_P(Archs, SessionState, ::testing::Values("qwen3moe", "deepseek4", "glm-dsa"));

}  // namespace
}  // namespace ds4

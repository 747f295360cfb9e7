// Session state properties on models from llama.cpp's generator (fresh seed
// each run): a snapshot restores the session exactly, rewinding is allowed
// only where the model's caches can resume, and reset starts clean. These
// are self-consistency checks of the session machinery; the logits
// themselves are checked against llama.cpp in models_*_test.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/family.h"
#include "oracle_harness.h"
#include "runtime/session.h"

namespace ds4 {
namespace {

using namespace oracle;

struct Loaded {
    std::unique_ptr<GgufFile> file;
    std::unique_ptr<ModelMap> map;
    std::unique_ptr<Model> model;
    std::unique_ptr<Backend> backend;
};

Loaded load(const fs::path& path) {
    Loaded l;
    l.file = GgufFile::open(path.string());
    l.map = ModelMap::build(*l.file, MapSelection{});
    l.model = load_model(*l.file, *l.map);
    l.backend = make_cpu_backend(2);
    return l;
}

fs::path make_model(const std::string& arch, uint64_t seed, const TempDir& dir) {
    const fs::path raw = generate_arch_model(arch, model_seed(seed), dir.path());
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
    EXPECT_EQ(snap.n_past, static_cast<int64_t>(prefix.size()));
    EXPECT_GT(snap.bytes(), 0u);
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

INSTANTIATE_TEST_SUITE_P(Archs, SessionState, ::testing::Values("qwen3moe", "deepseek4"));

}  // namespace
}  // namespace ds4

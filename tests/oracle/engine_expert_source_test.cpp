// Weight sources (issue 9): an expert cache serves the routed experts from
// its own, separately allocated copy of their bytes, read from the file
// through exact views while the model map holds no routed expert at all.
// Its logits equal the resident source's bit for bit on the CPU, for every
// position of a chunked prefill and a greedy decode, at a budget of every
// expert (a full second copy) and at one block's worth, where each block
// evicts the previous ones' experts and re-reads them on the next step.
// Slots are filled in first-use order, so slot indices differ from expert
// ids: an op that read the map, or ignored the rewritten routing, would
// compute other experts. A budget below one step's need is one sentence.
// Models from llama.cpp's generator (Qwen3-MoE with its per-expert scales,
// and both families redrawn at realistic magnitudes), fresh seed each run.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>

#include "common/error.h"
#include "engine/engine.h"
#include "experts/expert_cache.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/family.h"
#include "expert_source_run.h"
#include "oracle_harness.h"

namespace ds4 {
namespace {

using namespace oracle;

struct Run : GreedyRun {
    ExpertSourceStats stats;
    int64_t slots = 0;
};

Run run(const fs::path& model, std::optional<int64_t> slots, const std::vector<int32_t>& prompt, int64_t chunk,
        int n_decode, bool overlap = true) {
    EngineOptions o;
    o.model = model.string();
    o.backend.name = "cpu";
    o.backend.threads = 2;
    o.chat = false;
    o.expert_cache_slots = slots;
    o.ssd_streaming.overlap = overlap;
    o.ssd_streaming.lookahead = true;  // off by default; these runs cover it
    Run r;
    static_cast<GreedyRun&>(r) = greedy_run(o, prompt, chunk, n_decode, [&](const ds4::Engine& e) {
        if (const auto* cache = dynamic_cast<const ExpertCache*>(&e.model().expert_source())) {
            r.stats = cache->stats();
            r.slots = cache->slots();
        }
    });
    return r;
}

bool is_gate_exps(const std::string& name) { return name.ends_with(".ffn_gate_exps.weight"); }

void expect_cache_equals_resident(const fs::path& model, std::mt19937_64& rng) {
    const auto file = GgufFile::open(model.string());
    const std::string arch = file->architecture();
    const int64_t n_expert = int64_t(*file->get_uint(arch + ".expert_count"));
    const GgufSummary summary = read_gguf_summary(model);
    const auto V = int32_t(summary.n_vocab);
    const size_t moe_blocks = summary.count_if_name(is_gate_exps);
    const auto prompt = random_token_ids(rng, 20 + rng() % 40, V);
    const int64_t chunk = 1 + int64_t(rng() % prompt.size());
    const int n_decode = 8;
    SCOPED_TRACE(std::to_string(prompt.size()) + " tokens in chunks of " + std::to_string(chunk));

    const Run want = run(model, std::nullopt, prompt, chunk, n_decode);
    EXPECT_TRUE(want.map_holds_an_expert);
    // Every expert, one block's worth, and a single slot (a step's other
    // experts then go to scratch slots, or the block is read whole).
    for (const int64_t slots : {int64_t(0), n_expert, int64_t(1)}) {
        SCOPED_TRACE("expert cache of " + std::to_string(slots) + " slots");
        const Run got = run(model, slots, prompt, chunk, n_decode);
        EXPECT_FALSE(got.map_holds_an_expert) << "the model map holds routed experts beside the cache";
        EXPECT_EQ(got.logits, want.logits) << "the cache's logits differ from the resident source's";
        EXPECT_EQ(got.generated, want.generated);
        EXPECT_GT(got.stats.misses, 0u);
        EXPECT_EQ(got.stats.lookups, got.stats.hits + got.stats.misses);
        if (slots == n_expert && got.slots < 2 * n_expert && moe_blocks >= 2) {
            // Fewer slots than two blocks' experts: more experts are read
            // (one by one, or whole blocks at a time) than the cache holds
            // (GLM-5's generator model has a single MoE block).
            EXPECT_GT(got.stats.misses + got.stats.full_layer_reads * uint64_t(n_expert), uint64_t(got.slots));
        }
        // The CPU reads a step's misses while it computes the hits (and
        // the shared expert): every step that missed did so here.
        EXPECT_GT(got.stats.background_loads, 0u) << "no step read its misses in the background";
        // Decode steps guess the next block's experts and read those the
        // slots lack (not when the slots hold every expert); what was read
        // ahead and used is a subset of the misses.
        if (slots != 0 && moe_blocks >= 2)
            EXPECT_GT(got.stats.lookahead_reads, 0u) << "no expert was read ahead on the router lookahead";
        EXPECT_LE(got.stats.lookahead_hits, got.stats.misses);
        if (slots == n_expert) {
            // And with the overlap off: the step waits, the same bits.
            const Run waited = run(model, slots, prompt, chunk, n_decode, false);
            EXPECT_EQ(waited.logits, want.logits) << "--ssd-streaming-overlap off changes the logits";
            EXPECT_EQ(waited.stats.background_loads, 0u);
            EXPECT_EQ(waited.stats.lookahead_reads, 0u);
            EXPECT_EQ(waited.stats.misses, got.stats.misses) << "the overlap changed what the cache decided";
        }
        std::printf("%s, %lld slots: %llu lookups, %llu hits, %llu misses, %.2f MiB read, %llu read ahead (%llu used)\n",
                    arch.c_str(), static_cast<long long>(got.slots), static_cast<unsigned long long>(got.stats.lookups),
                    static_cast<unsigned long long>(got.stats.hits), static_cast<unsigned long long>(got.stats.misses),
                    double(got.stats.bytes_read) / double(1 << 20),
                    static_cast<unsigned long long>(got.stats.lookahead_reads),
                    static_cast<unsigned long long>(got.stats.lookahead_hits));
    }
}

TEST(ExpertSource, CacheEqualsResidentQwen3MoeWithExpertScales) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    const fs::path m = generate_arch_model("qwen3moe", model_seed(seed), dir.path());
    ASSERT_TRUE(GgufFile::open(m.string())->find_tensor("blk.0.ffn_down_exps.scale"))
        << "the generator no longer writes per-expert scales; this case would not cover them";
    expect_cache_equals_resident(m, rng);
}

TEST(ExpertSource, CacheEqualsResidentQwen3MoeRealistic) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    expect_cache_equals_resident(realistic_qwen3moe(dir.path(), model_seed(seed)), rng);
}

// GLM-5: a dense block (no experts to cache) before the MoE block.
TEST(ExpertSource, CacheEqualsResidentGlmDsa) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    expect_cache_equals_resident(realistic_glm_dsa(dir.path(), model_seed(seed)), rng);
}

TEST(ExpertSource, CacheEqualsResidentDeepSeek4) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    expect_cache_equals_resident(realistic_deepseek4(dir.path(), model_seed(seed)), rng);
}

// A read that fails while the step computes its hits fails that step with
// the read's sentence (the MoE op waits for it before the misses) and
// loses nothing: the slots it was filling are forgotten, so a later run on
// the same engine reads those experts again and gets the resident logits.
// A read ahead on the router lookahead that fails fails nothing: the step
// reads what it needs itself. Without the lookahead every failed read is a
// step's; with it, a failure is either, and never a wrong logit.
TEST(ExpertSource, FailedBackgroundReadFailsTheStepOnly) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    const fs::path m = realistic_qwen3moe(dir.path(), model_seed(seed));
    const auto V = int32_t(read_gguf_summary(m).n_vocab);
    const auto prompt = random_token_ids(rng, 12 + rng() % 12, V);
    const ds4::Run want = run(m, std::nullopt, prompt, 1, 0);

    for (const bool lookahead : {false, true}) {
        // Request N of the reader fails: inside the prompt's first steps
        // (three requests per missed expert). One block's worth of slots:
        // the cache evicts, and the lookahead has something to read.
        const int fail_at = 4 + int(rng() % 40);
        SCOPED_TRACE("read request " + std::to_string(fail_at) + " fails, lookahead " + (lookahead ? "on" : "off"));
        setenv("DS4_TEST_FAIL_READ", std::to_string(fail_at).c_str(), 1);
        EngineOptions o;
        o.model = m.string();
        o.backend.name = "cpu";
        o.backend.threads = 2;
        o.chat = false;
        o.expert_cache_slots = int64_t(*GgufFile::open(m.string())->get_uint("qwen3moe.expert_count"));
        o.ssd_streaming.lookahead = lookahead;
        std::unique_ptr<ds4::Engine> engine;
        try {
            engine = ds4::Engine::open(o);
        } catch (...) {
            unsetenv("DS4_TEST_FAIL_READ");
            throw;
        }
        unsetenv("DS4_TEST_FAIL_READ");
        SessionOptions so;
        so.n_ctx = int64_t(prompt.size()) + 2;
        so.prefill_chunk = 1;
        bool failed = false;
        {
            const auto s = engine->new_session(so);
            try {
                const std::vector<float> got = s->eval(prompt, true);
                EXPECT_EQ(got, want.logits) << "a failed read ahead changed the logits";
            } catch (const Error& e) {
                failed = true;
                EXPECT_NE(std::string(e.what()).find("DS4_TEST_FAIL_READ"), std::string::npos) << e.what();
            }
        }
        if (!lookahead) EXPECT_TRUE(failed) << "the step whose read failed did not fail";
        EXPECT_GT(engine->expert_stats().background_loads, 0u);
        const auto s = engine->new_session(so);
        EXPECT_EQ(s->eval(prompt, true), want.logits) << "a slot the failed read was filling was used as if filled";
    }
}

}  // namespace
}  // namespace ds4

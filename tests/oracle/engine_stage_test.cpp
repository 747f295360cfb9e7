// Stages chained = the whole model: the blocks split into two or three
// slices, each loaded as its own model with its own map and state; the
// first embeds, the others continue from the previous stage's hidden rows
// (DeepSeek V4: every hyper-connection stream), the last applies the head.
// The chained logits equal the whole model's (relative L2 <= 1e-6, same
// argmax), on the CPU, at every split of llama.cpp's generator models
// redrawn at realistic magnitudes: for DeepSeek V4 (schedule {window,
// window, ratio 4, ratio 128}, two hash-routed layers) the splits fall after
// the hash layers, before the ratio-4 layer and before the ratio-128 layer.
// A middle stage maps neither the embedding nor the head. Fresh seed each run.
#include "oracle_harness.h"
#include "support/batch_scenario.h"
#include "support/stage_chain.h"

#include "backend/backend.h"
#include "common/error.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "engine/slot_pool.h"
#include "models/family.h"

namespace ds4 {
namespace {

using namespace oracle;
using ds4::test::Stage;
using ds4::test::load_stage;
using ds4::test::run_chain;

void expect_chain_equals_whole(const fs::path& path, const std::vector<std::vector<int>>& splits, size_t lo, size_t hi,
                               std::mt19937_64& rng) {
    const auto file = GgufFile::open(path.string());
    auto cpu = make_cpu_backend(2);
    const int n_layer = int(*file->get_uint(file->architecture() + ".block_count"));
    const auto V = int32_t(read_gguf_summary(path).n_vocab);
    const auto tokens = random_token_ids(rng, lo + rng() % (hi - lo + 1), V);
    const int64_t n_ctx = int64_t(tokens.size());
    const int64_t chunk = 1 + int64_t(rng() % tokens.size());
    std::vector<Stage> whole;
    whole.push_back(load_stage(*file, LayerRange::all(), n_layer, *cpu, n_ctx));
    const auto want = run_chain(whole, *cpu, tokens, chunk, n_ctx);
    for (const auto& cut : splits) {
        std::string name;
        std::vector<Stage> chain;
        int begin = 0;
        for (size_t i = 0; i <= cut.size(); ++i) {
            const LayerRange r{begin, i < cut.size() ? cut[i] : n_layer};
            name += (name.empty() ? "" : " | ") + r.spelling(n_layer);
            chain.push_back(load_stage(*file, r, n_layer, *cpu, n_ctx));
            begin = r.end;
        }
        SCOPED_TRACE("stages " + name + ", chunk " + std::to_string(chunk) + ", " + std::to_string(tokens.size()) +
                     " tokens");
        for (size_t i = 1; i + 1 < chain.size(); ++i) {
            EXPECT_EQ(chain[i].map->file().find_tensor("token_embd.weight") &&
                          chain[i].map->region_of(chain[i].map->file().find_tensor("token_embd.weight")->file_offset, 1),
                      false)
                << "a middle stage mapped the embedding";
        }
        bool same = false;
        const double e = ds4::test::worst_rel_l2(run_chain(chain, *cpu, tokens, chunk, n_ctx), want, V, &same);
        EXPECT_GE(e, 0.0);
        EXPECT_LE(e, 1e-6);
        EXPECT_TRUE(same);
        std::printf("stages %s: worst rel_l2 %.3g\n", name.c_str(), e);
    }
}

TEST(Stages, Qwen3MoeChainedEqualsWhole) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    expect_chain_equals_whole(realistic_qwen3moe(dir.path(), model_seed(seed)), {{1}}, 20, 60, rng);
}

TEST(Stages, DeepSeek4ChainedEqualsWholeAcrossTheSchedule) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    // Layers 0-1 hash-routed window layers, 2 ratio 4, 3 ratio 128.
    expect_chain_equals_whole(realistic_deepseek4(dir.path(), model_seed(seed)), {{1}, {2}, {3}, {1, 3}, {2, 3}}, 150,
                              300, rng);
}

// GLM-5: block 0 dense, block 1 MoE; prompts past the indexer's top-k 32.
TEST(Stages, GlmDsaChainedEqualsWhole) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    expect_chain_equals_whole(realistic_glm_dsa(dir.path(), model_seed(seed)), {{1}}, 40, 90, rng);
}

// A GLM-5.2 block that reuses an earlier block's indexer selection cannot
// start a stage (the selection does not travel between stages): one sentence.
TEST(Stages, GlmDsaStageAtASharedIndexerBlockIsOneSentence) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    TempDir dir;
    GlmRewrite r;
    r.indexer_types = "1,0";
    const fs::path m = glm_rewrite(generate_arch_model("glm-dsa", model_seed(seed), dir.path()), dir / "shared.gguf", r,
                                   model_seed(seed));
    const auto file = GgufFile::open(m.string());
    auto cpu = make_cpu_backend(1);
    try {
        load_stage(*file, LayerRange{1, 2}, 2, *cpu, 8);
        ADD_FAILURE() << "a stage starting at a shared-indexer block loaded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("its own indexer"), std::string::npos) << e.what();
    }
}

// The same through the engine's SlotPool, as a pipeline worker runs a stage:
// each stage's pool takes the previous pool's hidden rows (host floats) and
// two sequences share each step.
TEST(Stages, SlotPoolsChainedEqualWholePool) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    const fs::path m = realistic_qwen3moe(dir.path(), model_seed(seed));
    const auto file = GgufFile::open(m.string());
    auto cpu = make_cpu_backend(2);
    const auto V = int32_t(read_gguf_summary(m).n_vocab);
    const auto a = random_token_ids(rng, 9, V), b = random_token_ids(rng, 4, V);
    const int64_t n_ctx = 16;
    Stage whole = load_stage(*file, LayerRange::all(), 2, *cpu, n_ctx);
    Stage first = load_stage(*file, LayerRange{0, 1}, 2, *cpu, n_ctx), last = load_stage(*file, LayerRange{1, 2}, 2, *cpu, n_ctx);
    SlotPool pw(*whole.model, *cpu, 2, n_ctx), p0(*first.model, *cpu, 2, n_ctx), p1(*last.model, *cpu, 2, n_ctx);
    const SeqStep step[2] = {{0, a, true}, {1, b, false}};
    const auto want = pw.step(step);
    const auto h = p0.step(step);
    ASSERT_EQ(h[0].size(), a.size() * size_t(p0.hidden_cols()));  // every row's hidden state
    ASSERT_EQ(h[1].size(), b.size() * size_t(p0.hidden_cols()));
    std::vector<float> hidden(h[0]);
    hidden.insert(hidden.end(), h[1].begin(), h[1].end());
    EXPECT_THROW(p1.step(step), Error);  // the second stage needs the hidden rows
    const auto got = p1.step(step, hidden);
    EXPECT_EQ(got, want);
}

TEST(Stages, WrongHiddenInputIsOneSentence) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    TempDir dir;
    const fs::path m = strip_scales(generate_arch_model("qwen3moe", model_seed(seed), dir.path()), dir / "s.gguf");
    const auto file = GgufFile::open(m.string());
    auto cpu = make_cpu_backend(1);
    Stage first = load_stage(*file, LayerRange{0, 1}, 2, *cpu, 8), second = load_stage(*file, LayerRange{1, 2}, 2, *cpu, 8);
    const std::vector<int32_t> ids = {1, 2};
    const ds4::test::HostBatch hb = ds4::test::sequence_batch(*cpu, ids, 0, 8, /*all_logits=*/false);
    const Batch& b = hb.batch;
    Tensor wrong = cpu->alloc(2, 3);
    EXPECT_THROW(second.model->forward(*cpu, *second.state, b), Error);          // no hidden state
    EXPECT_THROW(second.model->forward(*cpu, *second.state, b, &wrong), Error);  // wrong width
    const Tensor h = first.model->forward(*cpu, *first.state, b);
    EXPECT_THROW(first.model->forward(*cpu, *first.state, b, &h), Error);  // the first stage embeds
    EXPECT_NO_THROW(second.model->forward(*cpu, *second.state, b, &h));
}

}  // namespace
}  // namespace ds4

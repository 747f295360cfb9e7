// Batched = alone on the CPU: B sequences of different lengths run through
// one SlotPool, one forward pass per step mixing prefill chunks and decodes,
// slots freed and reused, give every sequence the logits it gets alone in a
// Session (relative L2 <= 1e-6, the same argmax everywhere). Every family
// from llama.cpp's generator, redrawn at realistic magnitudes (Qwen3-MoE
// widened to 8 experts / 3 used / 1 KV head; GLM-5 rewritten to 8 grouped
// experts and indexer top-k 32), fresh seed each run.
#include "oracle_harness.h"
#include "support/batch_scenario.h"
#include "support/loaded_model.h"

#include "backend/backend.h"
#include "common/error.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/family.h"

namespace ds4 {
namespace {

using namespace oracle;

using Loaded = ds4::test::LoadedModel;
Loaded load(const fs::path& path) { return ds4::test::load_whole_model(path.string()); }

// B slots, more sequences than slots (so slots are freed and reused),
// prompts of lo..hi tokens, 8 decode tokens each, chunks up to max_chunk.
void expect_batched_equals_alone(const Model& model, int B, int lo, int hi, int max_chunk, int64_t n_ctx,
                                 std::mt19937_64& rng) {
    auto cpu = make_cpu_backend(2);
    const auto V = static_cast<int32_t>(model.info().n_vocab);
    auto seqs = ds4::test::draw_sequences(rng, B + B / 2 + 1, V, lo, hi, 8);
    // Continuations of 8, 7 and 6 tokens: sequences that started together
    // cannot all end together, so a freed slot's next prompt is prefilled
    // beside another's decode whatever the drawn lengths and chunks.
    for (size_t i = 0; i < seqs.size(); ++i) seqs[i].continuation.resize(8 - i % 3);
    ds4::test::run_alone(model, *cpu, seqs, n_ctx);
    const auto batched = ds4::test::run_batched(model, *cpu, seqs, B, n_ctx, max_chunk, rng);
    EXPECT_GT(batched.mixed_steps, 0) << "no step mixed a prefill chunk with decodes";
    for (size_t i = 0; i < seqs.size(); ++i) {
        bool same = false;
        const double e = ds4::test::worst_rel_l2(batched.logits[i], seqs[i].logits, V, &same);
        EXPECT_GE(e, 0.0) << "sequence " << i << ": batched and alone return different row counts";
        EXPECT_LE(e, 1e-6) << "sequence " << i << " of " << seqs.size() << " (" << B << " slots)";
        EXPECT_TRUE(same) << "sequence " << i << ": an argmax differs from the sequence alone";
    }
    std::printf("%s, %d slots, %zu sequences: %d forward passes (%d mixed) instead of %zu\n", model.info().arch.c_str(),
                B, seqs.size(), batched.steps, batched.mixed_steps, [&] {
                    size_t n = 0;
                    for (const auto& s : seqs) n += s.continuation.size() + 1;
                    return n;
                }());
}

class BatchedEqualsAlone : public ::testing::TestWithParam<int> {};

TEST_P(BatchedEqualsAlone, Qwen3Moe) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    const Loaded m = load(realistic_qwen3moe(dir.path(), model_seed(seed)));
    expect_batched_equals_alone(*m.model, GetParam(), 3, 60, 17, 96, rng);
}

// Schedule {window, window, ratio 4, ratio 128}, two hash-routed layers;
// prompts long enough that ratio-128 blocks complete and the indexer's
// top-k saturates in some sequences while others are still short.
TEST_P(BatchedEqualsAlone, DeepSeek4) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    const Loaded m = load(realistic_deepseek4(dir.path(), model_seed(seed)));
    expect_batched_equals_alone(*m.model, GetParam(), 3, 170, 70, 190, rng);
}

// GLM-5: indexer top-k 32, so the longer sequences attend to a chosen
// subset while the shorter ones still see everything.
TEST_P(BatchedEqualsAlone, GlmDsa) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    const Loaded m = load(realistic_glm_dsa(dir.path(), model_seed(seed)));
    expect_batched_equals_alone(*m.model, GetParam(), 3, 60, 17, 96, rng);
}

INSTANTIATE_TEST_SUITE_P(Slots, BatchedEqualsAlone, ::testing::Values(2, 5, 16));

// DeepSeek V4's compressors and indexer keep per-sequence order: a batch
// whose rows of one sequence are split apart is one sentence.
TEST(BatchedDeepSeek4, SplitSequenceRowsAreOneSentence) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    TempDir dir;
    const Loaded m = load(generate_arch_model("deepseek4", model_seed(seed), dir.path()));
    auto cpu = make_cpu_backend(1);
    const auto state = m.model->new_state(*cpu, 16, 2);
    const int32_t tokens[3] = {1, 2, 3}, positions[3] = {0, 0, 1}, slots[3] = {0, 1, 0};
    Batch b;
    b.n = 3;
    b.token_ids = cpu->ints(tokens, 3);
    b.cache = CacheRows{cpu->ints(positions, 3), cpu->ints(slots, 3), 16};
    const int32_t last[1] = {2};
    b.n_logits = 1;
    b.logit_rows = cpu->ints(last, 1);
    b.host_tokens = tokens;
    b.host_positions = positions;
    b.host_slots = slots;
    try {
        m.model->forward(*cpu, *state, b);
        ADD_FAILURE() << "a batch splitting sequence slot 0 ran";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("together in the batch"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace ds4

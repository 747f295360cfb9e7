// Batched = alone on the CPU: B sequences of different lengths run through
// one SlotPool, one forward pass per step mixing prefill chunks and decodes,
// slots freed and reused, give every sequence the logits it gets alone in a
// Session (relative L2 <= 1e-6, the same argmax everywhere). Qwen3-MoE from
// llama.cpp's generator, widened to 8 experts / 3 used / 1 KV head and
// redrawn at realistic magnitudes, fresh seed each run. DeepSeek V4 holds one
// sequence per state for now, and says so.
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

class BatchedEqualsAlone : public ::testing::TestWithParam<int> {};

TEST_P(BatchedEqualsAlone, Qwen3Moe) {
    const int B = GetParam();
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    const Loaded m = load(realistic_qwen3moe(dir.path(), model_seed(seed)));
    auto cpu = make_cpu_backend(2);
    const auto V = static_cast<int32_t>(m.model->info().n_vocab);
    const int64_t n_ctx = 96;
    // More sequences than slots, so slots are freed and reused.
    auto seqs = ds4::test::draw_sequences(rng, B + B / 2 + 1, V, 3, 60, 8);
    ds4::test::run_alone(*m.model, *cpu, seqs, n_ctx);
    const auto batched = ds4::test::run_batched(*m.model, *cpu, seqs, B, n_ctx, 17, rng);
    EXPECT_GT(batched.mixed_steps, 0) << "no step mixed a prefill chunk with decodes";
    for (size_t i = 0; i < seqs.size(); ++i) {
        bool same = false;
        const double e = ds4::test::worst_rel_l2(batched.logits[i], seqs[i].logits, V, &same);
        EXPECT_GE(e, 0.0) << "sequence " << i << ": batched and alone return different row counts";
        EXPECT_LE(e, 1e-6) << "sequence " << i << " of " << seqs.size() << " (" << B << " slots)";
        EXPECT_TRUE(same) << "sequence " << i << ": an argmax differs from the sequence alone";
    }
    std::printf("%d slots, %zu sequences: %d forward passes (%d mixed) instead of %zu\n", B, seqs.size(),
                batched.steps, batched.mixed_steps, [&] {
                    size_t n = 0;
                    for (const auto& s : seqs) n += s.continuation.size() + 1;
                    return n;
                }());
}

INSTANTIATE_TEST_SUITE_P(Slots, BatchedEqualsAlone, ::testing::Values(2, 5, 16));

TEST(BatchedDeepSeek4, OneSequencePerStateIsSaidClearly) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    TempDir dir;
    const Loaded m = load(generate_arch_model("deepseek4", model_seed(seed), dir.path()));
    auto cpu = make_cpu_backend(1);
    try {
        SlotPool pool(*m.model, *cpu, 2, 64);
        ADD_FAILURE() << "a two-sequence DeepSeek V4 pool was created";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("deepseek4 runs 1 to 1 sequences"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace ds4

// Whole-model logits of synthetic DeepSeek V4 files (`ds4-gguf synth --arch
// deepseek4 --preset tiny`, f32 and the published q2 / q4 quant mixes), CUDA
// against the CPU backend (cuda_model_fixture.h): prefill, chunked prefill
// (7 and 3) and 64 greedy decode steps within 1e-5 relative error per
// position, with the same tokens; decode both recorded and replayed (the
// index plans, the indexer's top-k and hash routing on the device; checked
// to have really replayed) and op by op. Prompts of 200+ positions make every part
// of the attention work: the 32-position window wraps, ratio-4 blocks outnumber the indexer's
// top-k of 16 (from position 68), and ratio-128 blocks complete during the
// prefill (position 127) and during the decode (position 255).
#include <algorithm>
#include <string>

#include "cuda_model_fixture.h"
#include "engine/slot_pool.h"
#include "support/batch_scenario.h"
#include "support/stage_chain.h"

namespace ds4 {
namespace {

using cudatest::CudaModelFixture;

class CudaDsv4Model : public CudaModelFixture {};

TEST_P(CudaDsv4Model, LogitsAndGreedyTokensMatchCpu) {
    const auto l = load(synth("--arch deepseek4 --preset tiny --quant " + GetParam(),
                              "deepseek4-tiny-" + GetParam() + ".gguf"));
    ASSERT_EQ(l.model->info().arch, "deepseek4");
    CudaBackend gpu(0);
    gpu.attach_weights(*l.map);
    compare_with_cpu(*l.model, gpu, random_prompt(l.model->info().n_vocab, 200, 215), 64, GetParam(),
                     Decode::replayed_and_op_by_op);
}

// A planted 1% error in one row of layer 0's KV projection must fail the bound
// (a 0.1% error measured 3.9e-5 to 1.7e-4).
TEST_F(CudaDsv4Model, PlantedWeightErrorFailsBound) {
    expect_planted_row_error_caught(synth("--arch deepseek4 --preset tiny --quant f32", "deepseek4-tiny-f32.gguf"),
                                    "blk.0.attn_kv.weight", 5, 60, 80);
}

// Stages on the GPU: the tiny preset ({0, 0, 4, 128, 4}, 3 hash layers)
// split before the ratio-4 and after the ratio-128 layer, chained on the
// GPU with the hyper-connection streams handed over, against the whole
// model on the CPU.
TEST_F(CudaDsv4Model, ChainedStagesMatchWholeModelOnCpu) {
    const auto path = synth("--arch deepseek4 --preset tiny --quant q4", "deepseek4-tiny-q4.gguf");
    const auto file = GgufFile::open(path.string());
    const int n_layer = int(*file->get_uint("deepseek4.block_count"));
    auto cpu = make_cpu_backend(2);
    CudaBackend gpu(0);
    const auto prompt = random_prompt(load(path).model->info().n_vocab, 150, 200);
    const int64_t n_ctx = int64_t(prompt.size()), chunk = 1 + int64_t(rng_() % 64);
    std::vector<ds4::test::Stage> whole, chain;
    whole.push_back(ds4::test::load_stage(*file, LayerRange::all(), n_layer, *cpu, n_ctx));
    for (LayerRange r : {LayerRange{0, 2}, LayerRange{2, 4}, LayerRange{4, n_layer}}) {
        chain.push_back(ds4::test::load_stage(*file, r, n_layer, gpu, n_ctx));
        gpu.attach_weights(*chain.back().map);
    }
    const auto want = ds4::test::run_chain(whole, *cpu, prompt, chunk, n_ctx);
    const auto got = ds4::test::run_chain(chain, gpu, prompt, chunk, n_ctx);
    EXPECT_TRUE(per_position(got, want, load(path).model->info().n_vocab, "stages 0:1 | 2:3 | 4:output"));
}

// Pipeline stages replay their decode steps too: two stage pools on the GPU
// (the hidden rows handed over through the host, as between pipeline
// processes), each recording its one-row step once and replaying it, give
// the whole model's logits (its own pool, replayed as well) at every step.
TEST_F(CudaDsv4Model, StagePoolsReplayDecodeLikeTheWholeModel) {
    const auto path = synth("--arch deepseek4 --preset tiny --quant q2", "deepseek4-tiny-q2.gguf");
    const auto file = GgufFile::open(path.string());
    const int n_layer = int(*file->get_uint("deepseek4.block_count"));
    CudaBackend gpu(0);
    const int64_t n_ctx = 512;
    const int cut = 1 + int(rng_() % (n_layer - 1));
    std::vector<ds4::test::Stage> parts;
    for (LayerRange r : {LayerRange::all(), LayerRange{0, cut}, LayerRange{cut, n_layer}}) {
        parts.push_back(ds4::test::load_stage(*file, r, n_layer, gpu, n_ctx));
        gpu.attach_weights(*parts.back().map);
    }
    const int64_t V = parts[0].model->info().n_vocab;
    ds4::SlotPool whole(*parts[0].model, gpu, 1, n_ctx), s0(*parts[1].model, gpu, 1, n_ctx),
        s1(*parts[2].model, gpu, 1, n_ctx);
    std::vector<int32_t> tokens = random_prompt(V, 100, 160);
    int32_t next = 0;
    for (int step = 0; step <= 16; ++step) {
        const std::span<const int32_t> in = step == 0 ? std::span<const int32_t>(tokens) : std::span<const int32_t>(&next, 1);
        const ds4::SeqStep r{0, in, false};
        const std::vector<float> want = whole.step(std::span<const ds4::SeqStep>(&r, 1)).front();
        const std::vector<float> hidden = s0.step(std::span<const ds4::SeqStep>(&r, 1)).front();
        const std::vector<float> got = s1.step(std::span<const ds4::SeqStep>(&r, 1), hidden).front();
        ASSERT_TRUE(per_position(got, want, V, "stages 0:" + std::to_string(cut - 1) + " | " + std::to_string(cut) +
                                                   ":output, step " + std::to_string(step)));
        next = int32_t(std::max_element(want.begin(), want.end()) - want.begin());
    }
    EXPECT_EQ(whole.decode_steps_replayed(), 16);
    EXPECT_EQ(s0.decode_steps_replayed(), 16) << s0.decode_replay_refused();
    EXPECT_EQ(s1.decode_steps_replayed(), 16) << s1.decode_replay_refused();
}

// Batches on the GPU: 5 slots, more sequences than slots (slots reset and
// reused), steps mixing prefill chunks of some sequences with decodes of
// others and all-decode steps (recorded once per row count and replayed),
// prompts up to 200 tokens (ratio-128 blocks complete in some sequences,
// the indexer's top-k saturates); every sequence's logits within the FP32
// bound of the same sequence alone on the CPU.
TEST_F(CudaDsv4Model, BatchedSequencesMatchCpuAlone) {
    const auto l = load(synth("--arch deepseek4 --preset tiny --quant q4", "deepseek4-tiny-q4.gguf"));
    CudaBackend gpu(0);
    gpu.attach_weights(*l.map);
    auto cpu = make_cpu_backend(2);
    const int64_t V = l.model->info().n_vocab, n_ctx = 220;
    auto seqs = ds4::test::draw_sequences(rng_, 8, int32_t(V), 3, 200, 12);
    ds4::test::run_alone(*l.model, *cpu, seqs, n_ctx, &rng_);
    const auto batched = ds4::test::run_batched(*l.model, gpu, seqs, 5, n_ctx, 70, rng_);
    EXPECT_GT(batched.mixed_steps, 0);
    EXPECT_GT(batched.replayed, 0) << "no all-decode step was replayed";
    for (size_t i = 0; i < seqs.size(); ++i) {
        bool same = false;
        const double e = ds4::test::worst_rel_l2(batched.logits[i], seqs[i].logits, V, &same);
        EXPECT_GE(e, 0.0) << "sequence " << i << ": row counts differ";
        EXPECT_LE(e, cudatest::kExactBound) << "sequence " << i;
    }
    std::printf("  batched: %d passes (%d mixed, %lld replayed)\n", batched.steps, batched.mixed_steps,
                static_cast<long long>(batched.replayed));
}

// Real shapes: DeepSeek V4 Flash (256 experts, 6 used, 4096-wide embeddings,
// 64 query heads of 512, the 129,280-token vocabulary) in the published q2
// mix, truncated to 4 blocks (window, ratio-4 and ratio-128 layers), on a
// few hundred tokens.
TEST_F(CudaDsv4Model, RealShapeFlashQ2) {
    const auto l = load(synth("--arch deepseek4 --preset flash --quant q2 --n-layer 4", "flash-q2.gguf"));
    CudaBackend gpu(0);
    gpu.attach_weights(*l.map);
    compare_with_cpu(*l.model, gpu, random_prompt(l.model->info().n_vocab, 200, 300), 16, "deepseek4-flash q2",
                     Decode::replayed_and_op_by_op);
}

// The tensor-core prefill on the real shape (expect_f16_prefill_close):
// window, ratio-4 and ratio-128 layers, hyper-connections, the q2 mix.
TEST_F(CudaDsv4Model, F16PrefillStaysCloseToCpuOnFlashQ2) {
    const auto l = load(synth("--arch deepseek4 --preset flash --quant q2 --n-layer 4", "flash-q2.gguf"));
    expect_f16_prefill_close(l, 3, 100, 200, "deepseek4-flash q2");
}

INSTANTIATE_TEST_SUITE_P(SyntheticDeepSeek4Tiny, CudaDsv4Model, ::testing::Values("f32", "q2", "q4"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ds4

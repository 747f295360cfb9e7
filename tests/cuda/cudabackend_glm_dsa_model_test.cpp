// Whole-model logits of GLM-5 (glm-dsa) files, CUDA against the CPU backend
// (cuda_model_fixture.h): prefill whole and in chunks of 7 and 3, then
// greedy decode within 1e-5 relative error per position with the same
// tokens, the decode both recorded and replayed (causal sets, the
// indexer's top-k and the sigmoid routing on the device; checked to have
// really replayed) and op by op. Two kinds of file, made fresh every run:
//
//   synth:  `ds4-gguf synth --arch glm-dsa --preset tiny` (f32, q8_0): a
//           dense lead block, expert groups, a shared-indexer block, top-k
//           16; prompts of 200+ tokens put most positions past the top-k.
//           And `--preset glm5-mini --quant q2 --n-layer 2`: GLM-5's width
//           and head sizes in llama-quantize's Q2_K mix.
//   llama:  llama.cpp's generator file (test-llama-archs -a '^glm-dsa$')
//           rewritten so routing and the indexer matter and redrawn at a
//           trained checkpoint's magnitudes, as the oracle tests make it
//           (tests/oracle/oracle_harness.h realistic_glm_dsa): one MLA head
//           over a 512-wide latent, 16 indexer heads, top-k 32, 8 experts
//           in 4 groups; prompts of 300+ tokens. DS4_CUDA_TEST_GLM names a
//           ready file instead, for GPU machines without the llama.cpp tools
//           (bench/cuda-glm-check.sh --pack makes one).
#include <algorithm>
#include <cstdlib>
#include <string>

#include "cuda_model_fixture.h"
#include "engine/slot_pool.h"
#include "support/batch_scenario.h"
#include "support/stage_chain.h"

namespace ds4 {
namespace {

using cudatest::CudaModelFixture;

class CudaGlmDsaModel : public CudaModelFixture {
protected:
    cudatest::fs::path tiny(const std::string& type) {
        return synth("--arch glm-dsa --preset tiny --type " + type, "glm-dsa-tiny-" + type + ".gguf");
    }

    // The llama.cpp generator's file, made as the oracle tests make it.
    cudatest::fs::path llama_file() {
        if (const char* f = std::getenv("DS4_CUDA_TEST_GLM"); f && *f) return f;
        const std::string s = std::to_string(uint32_t(seed_ & 0x7fffffff));
        const auto bin = cudatest::fs::path(DS4_ORACLE_DIR) / "bin", lib = cudatest::fs::path(DS4_ORACLE_DIR) / "lib";
        const auto tools = cudatest::bin_dir() / "tests";
        const std::string env = "LD_LIBRARY_PATH=" + lib.string() + ":" + bin.string() + " ";
        const std::string d = dir_.string();
        const std::string cmd =
            env + (bin / "test-llama-archs").string() + " -a '^(glm-dsa)$' -s " + s + " -o " + d + " && " + env +
            (tools / "llama_strip_scales").string() + " " + d + "/glm-dsa-moe.gguf " + d + "/stripped.gguf && " + env +
            (tools / "llama_glm_rewrite").string() + " " + d + "/stripped.gguf " + d +
            "/rewritten.gguf --experts 8 --experts-used 3 --expert-groups 4 --groups-used 2 --indexer-top-k 32"
            " --indexer-heads 16 --weights-norm 1 --weights-scale 2.5 --seed " + s + " && " + env +
            (tools / "llama_realistic").string() + " " + d + "/rewritten.gguf " + d + "/glm-routed.gguf --seed " + s;
        std::string out;
        if (cudatest::run(cmd, &out) != 0)
            throw Error("making the llama.cpp glm-dsa file failed (set DS4_CUDA_TEST_GLM?): " + out);
        return dir_ / "glm-routed.gguf";
    }
};

TEST_P(CudaGlmDsaModel, LogitsAndGreedyTokensMatchCpu) {
    const auto l = load(tiny(GetParam()));
    ASSERT_EQ(l.model->info().arch, "glm-dsa");
    CudaBackend gpu(0);
    gpu.attach_weights(*l.map);
    compare_with_cpu(*l.model, gpu, random_prompt(l.model->info().n_vocab, 200, 215), 64, "tiny " + GetParam(),
                     Decode::replayed_and_op_by_op);
}

// GLM-5's width and head sizes in llama-quantize's Q2_K mix (`--preset
// glm5-mini --quant q2`: q2_K, q3_K ffn_down and attn_output, a q6_K head,
// the 192-wide attn_k_b rows as q4_0): the quantized matvecs and the
// grouped latent projections at GLM-5's row widths; prompts past top-k 32.
TEST_F(CudaGlmDsaModel, Glm5MiniQ2MixMatchesCpu) {
    const auto l = load(synth("--arch glm-dsa --preset glm5-mini --quant q2 --n-layer 2", "glm5-mini-q2.gguf"));
    ASSERT_EQ(l.model->info().arch, "glm-dsa");
    CudaBackend gpu(0);
    gpu.attach_weights(*l.map);
    compare_with_cpu(*l.model, gpu, random_prompt(l.model->info().n_vocab, 100, 120), 16, "glm5-mini q2",
                     Decode::replayed_and_op_by_op);
}

TEST_F(CudaGlmDsaModel, LlamaGeneratorFileMatchesCpu) {
    const auto l = load(llama_file());
    ASSERT_EQ(l.model->info().arch, "glm-dsa");
    CudaBackend gpu(0);
    gpu.attach_weights(*l.map);
    compare_with_cpu(*l.model, gpu, random_prompt(l.model->info().n_vocab, 300, 340), 16, "llama.cpp glm-dsa",
                     Decode::replayed_and_op_by_op);
}

// A planted 1% error in one row of layer 1's kv projection (the latent
// cache's input) must fail the bound.
TEST_F(CudaGlmDsaModel, PlantedWeightErrorFailsBound) {
    expect_planted_row_error_caught(tiny("f32"), "blk.1.attn_kv_a_mqa.weight", 5, 60, 80);
}

// Stages on the GPU: the tiny preset (indexers full, full, shared, full)
// split where a stage may start (a block with its own indexer), chained on
// the GPU, against the whole model on the CPU.
TEST_F(CudaGlmDsaModel, ChainedStagesMatchWholeModelOnCpu) {
    const auto path = tiny("q8_0");
    const auto file = GgufFile::open(path.string());
    const auto whole_model = load(path);
    const int n_layer = whole_model.model->info().n_layer;
    ASSERT_EQ(n_layer, 4);
    auto cpu = make_cpu_backend(2);
    CudaBackend gpu(0);
    const auto prompt = random_prompt(whole_model.model->info().n_vocab, 150, 200);
    const int64_t n_ctx = int64_t(prompt.size()), chunk = 1 + int64_t(rng_() % 64);
    std::vector<ds4::test::Stage> whole, chain;
    whole.push_back(ds4::test::load_stage(*file, LayerRange::all(), n_layer, *cpu, n_ctx));
    for (LayerRange r : {LayerRange{0, 1}, LayerRange{1, 3}, LayerRange{3, n_layer}}) {
        chain.push_back(ds4::test::load_stage(*file, r, n_layer, gpu, n_ctx));
        gpu.attach_weights(*chain.back().map);
    }
    const auto want = ds4::test::run_chain(whole, *cpu, prompt, chunk, n_ctx);
    const auto got = ds4::test::run_chain(chain, gpu, prompt, chunk, n_ctx);
    EXPECT_TRUE(per_position(got, want, whole_model.model->info().n_vocab, "stages 0 | 1:2 | 3:output"));
}

// Pipeline stages replay their decode steps too: two stage pools on the GPU
// (hidden rows through the host, as between pipeline processes), each
// recording its one-row step and replaying it, give the whole model's
// logits (its own pool, replayed as well) at every step.
TEST_F(CudaGlmDsaModel, StagePoolsReplayDecodeLikeTheWholeModel) {
    const auto path = tiny("f32");
    const auto file = GgufFile::open(path.string());
    const int n_layer = load(path).model->info().n_layer;
    CudaBackend gpu(0);
    const int64_t n_ctx = 512;
    const int cut = rng_() % 2 ? 1 : 3;  // the blocks after block 0 with their own indexer
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
        const std::span<const int32_t> in =
            step == 0 ? std::span<const int32_t>(tokens) : std::span<const int32_t>(&next, 1);
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
// reused), steps mixing prefill chunks with decodes and all-decode steps
// (recorded once per row count and replayed), prompts up to 200 tokens
// (past the top-k of 16); every sequence's logits within the FP32 bound of
// the same sequence alone on the CPU.
TEST_F(CudaGlmDsaModel, BatchedSequencesMatchCpuAlone) {
    const auto l = load(tiny("q8_0"));
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

// The tensor-core prefill on GLM-5's widths in its q2 mix
// (expect_f16_prefill_close), past the indexer's top-k.
TEST_F(CudaGlmDsaModel, F16PrefillStaysCloseToCpuOnGlm5MiniQ2) {
    const auto l = load(synth("--arch glm-dsa --preset glm5-mini --quant q2 --n-layer 2", "glm5-mini-q2.gguf"));
    expect_f16_prefill_close(l, 6, 100, 300, "glm5-mini q2");
}

INSTANTIATE_TEST_SUITE_P(SyntheticGlmDsaTiny, CudaGlmDsaModel, ::testing::Values("f32", "q8_0"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ds4

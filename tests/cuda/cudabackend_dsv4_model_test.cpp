// Whole-model logits of synthetic DeepSeek V4 files (`ds4-gguf synth --arch
// deepseek4 --preset tiny`, f32 and the published q2 / q4 quant mixes), CUDA
// against the CPU backend (cuda_model_fixture.h): prefill, chunked prefill
// (7 and 3) and 64 greedy decode steps within 1e-3 relative error per
// position, with the same tokens. Prompts of 200+ positions make every part
// of the attention work: the 32-position window wraps, ratio-4 blocks outnumber the indexer's
// top-k of 16 (from position 68), and ratio-128 blocks complete during the
// prefill (position 127) and during the decode (position 255).
#include <string>

#include "cuda_model_fixture.h"

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
    compare_with_cpu(*l.model, gpu, random_prompt(l.model->info().n_vocab, 200, 215), 64, GetParam());
}

INSTANTIATE_TEST_SUITE_P(SyntheticDeepSeek4Tiny, CudaDsv4Model, ::testing::Values("f32", "q2", "q4"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ds4

// Qwen3-MoE: ds4 against llama.cpp's library on random-weight models from
// llama.cpp's own generator (test-llama-archs), with a fresh seed and fresh
// token ids every run.
//
//   F32 weights:        ds4 vs llama.cpp, per position rel L2 <= 1e-4, same argmax,
//                       at --prefill-chunk 1, 7 and the whole prompt; with and
//                       without the optional .scale tensors.
//   quantized weights:  ds4 on the Q4_K_M / Q8_0 / Q2_K file vs llama.cpp on the
//                       same file dequantized to F32: <= 8e-2, >= 90% argmax.
//   routed:             the F32 file widened to 8 experts (3 used) and 1 KV
//                       head, so routing and GQA count (llama_widen_moe).
//   greedy:             32 tokens of greedy continuation identical.
//   synth:              a model written by `ds4-gguf synth` loads in llama.cpp
//                       and gives ds4's logits.
#include "oracle_harness.h"
#include "oracle_llama_greedy.h"

namespace ds4::oracle {
namespace {

constexpr const char* kArch = "qwen3moe";

class Qwen3Moe : public ::testing::Test {
protected:
    void SetUp() override {
        seed_ = fresh_seed();
        rng_.seed(seed_);
        trace_.emplace(__FILE__, __LINE__,
                       "seed " + std::to_string(seed_) + " (model seed " + std::to_string(model_seed(seed_)) +
                           "; DS4_KEEP_TEMP=1 keeps " + dir_.path().string() + ")");
    }

    fs::path raw_model() { return generate_arch_model(kArch, model_seed(seed_), dir_.path()); }
    fs::path stripped_model() { return strip_scales(raw_model(), dir_ / "stripped.gguf"); }

    std::vector<int32_t> tokens(size_t n_vocab, size_t lo = 40, size_t hi = 100) {
        std::uniform_int_distribution<size_t> n(lo, hi);
        return random_token_ids(rng_, n(rng_), int32_t(n_vocab));
    }

    // ds4 at --prefill-chunk 1, 7 and the whole prompt, each against one
    // llama.cpp run on `ref_model`.
    void expect_matches_at_every_chunk(const fs::path& model, const fs::path& ref_model, const Tolerance& tol) {
        const size_t n_vocab = size_t(read_gguf_summary(model).n_vocab);
        // The router's top-k may not be left to rounding (clearly_decided_reference).
        const auto [ids, ref] = clearly_decided_reference(ref_model, tokens(n_vocab), n_vocab, dir_.path(), rng_);
        for (int chunk : {1, 7, int(ids.size())}) {
            SCOPED_TRACE("--prefill-chunk " + std::to_string(chunk) + ", " + std::to_string(ids.size()) +
                         " tokens: " + join_ids(ids));
            const Logits ours = engine_logits(Engine::ds4, model, ids, n_vocab, dir_.path(), {2, chunk});
            EXPECT_TRUE(logits_match(ours, ref, tol, "ds4 (chunk " + std::to_string(chunk) + ") vs llama.cpp"));
        }
    }

    TempDir dir_;
    uint64_t seed_ = 0;
    std::mt19937_64 rng_;
    std::optional<::testing::ScopedTrace> trace_;
};

// ---- (a) F32 weights ----------------------------------------------------------

TEST_F(Qwen3Moe, F32WithoutScaleTensorsMatchesLlama) {
    const fs::path m = stripped_model();
    ASSERT_EQ(read_gguf_summary(m).count_if_name(is_optional_scale_tensor_name), 0u);
    expect_matches_at_every_chunk(m, m, kF32Tolerance);
}

// Converted FP8/NVFP4 checkpoints carry per-tensor scales. llama.cpp
// (llama-graph.cpp build_lora_mm / build_lora_mm_id) multiplies the matmul
// RESULT by them, before any bias: q = (Wq x) * q.scale + q.bias (same for k,
// v), o = (Wo attn) * attn_output.scale, and per routed expert e:
// up = (Wup_e x) * up_exps.scale[e], gate likewise, down = (Wdown_e h) *
// down_exps.scale[e], before the routing weight. `.input_scale` tensors are
// loaded but unused by the qwen3moe graph.
TEST_F(Qwen3Moe, F32WithScaleTensorsMatchesLlama) {
    const fs::path m = raw_model();
    ASSERT_GT(read_gguf_summary(m).count_if_name(is_optional_scale_tensor_name), 0u)
        << "test-llama-archs wrote no .scale tensors, so this case would test nothing";
    expect_matches_at_every_chunk(m, m, kF32Tolerance);
}

// test-llama-archs's model uses both of its 2 experts and has as many KV
// heads as query heads, so routing and GQA cannot fail there. The widened
// file (8 experts, 3 used, 1 KV head for 2 query heads) makes top-k
// selection, the renormalised routing weights and the KV head mapping count.
TEST_F(Qwen3Moe, F32RoutedExpertsAndGqaMatchLlama) {
    const MoeShape shape{8, 3, 1};
    const fs::path m = widen_moe(stripped_model(), dir_ / "widened.gguf", shape, model_seed(seed_));
    expect_matches_at_every_chunk(m, m, kF32Tolerance);
}

TEST_F(Qwen3Moe, F32RoutedExpertsWithScaleTensorsMatchLlama) {
    const MoeShape shape{6, 2, 2};
    const fs::path m = widen_moe(raw_model(), dir_ / "widened-scales.gguf", shape, model_seed(seed_));
    expect_matches_at_every_chunk(m, m, kF32Tolerance);
}

// ---- (b) quantized weights ------------------------------------------------------

class Qwen3MoeQuant : public Qwen3Moe, public ::testing::WithParamInterface<std::string> {};

TEST_P(Qwen3MoeQuant, MatchesLlamaOnDequantizedFile) {
    const std::string type = GetParam();
    const fs::path q = quantize(stripped_model(), dir_ / ("q-" + type + ".gguf"), type);
    ASSERT_TRUE(read_gguf_summary(q).any_quantized()) << "llama-quantize " << type << " quantized nothing";
    const fs::path deq = dequantize(q, dir_ / ("deq-" + type + ".gguf"));
    const size_t n_vocab = size_t(read_gguf_summary(q).n_vocab);
    const auto ids = tokens(n_vocab, 80, 100);  // more rows: the 90% argmax bar is a rate
    SCOPED_TRACE(type + ", " + std::to_string(ids.size()) + " tokens: " + join_ids(ids));
    const Logits ref = engine_logits(Engine::llama, deq, ids, n_vocab, dir_.path());
    const Logits ours = engine_logits(Engine::ds4, q, ids, n_vocab, dir_.path());
    EXPECT_TRUE(logits_match(ours, ref, kQuantTolerance, "ds4 on " + type + " vs llama.cpp on it dequantized"));
}

INSTANTIATE_TEST_SUITE_P(Types, Qwen3MoeQuant, ::testing::Values("Q4_K_M", "Q8_0", "Q2_K", "Q3_K_M", "IQ4_XS"));

// ---- (c) greedy continuation ------------------------------------------------------

// llama.cpp generates 32 tokens greedily (in-process, through its KV cache). ds4 then
// evaluates the final sequence once per chunk size: because attention is
// causal, ds4's greedy continuation equals llama.cpp's exactly when ds4's
// argmax at every generated position's predecessor is the token llama.cpp
// chose there. That is the same check as generating with ds4 step by step,
// in one process launch instead of 32.
TEST_F(Qwen3Moe, GreedyContinuationIsIdentical) {
    constexpr int kSteps = 32;
    const fs::path m = widen_moe(stripped_model(), dir_ / "widened.gguf", MoeShape{8, 2, 1}, model_seed(seed_));
    const size_t n_vocab = size_t(read_gguf_summary(m).n_vocab);
    const auto prompt = tokens(n_vocab, 4, 12);
    const Continuation ref = llama_greedy(m, prompt, kSteps);
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), ref.tokens.begin(), ref.tokens.end());
    SCOPED_TRACE("prompt " + join_ids(prompt) + " | llama.cpp continuation " + join_ids(ref.tokens));

    for (int chunk : {int(seq.size()), 1}) {
        const Logits ours = engine_logits(Engine::ds4, m, seq, n_vocab, dir_.path(), {2, chunk});
        std::vector<int32_t> ds4_tokens;
        for (int s = 0; s < kSteps; ++s) {
            const size_t pos = prompt.size() - 1 + size_t(s);  // row that predicts generated token s
            const auto chosen = int32_t(ours.argmax(pos));
            ds4_tokens.push_back(chosen);
            const Logits& ref_row = ref.last_rows[size_t(s)];
            EXPECT_LE(rel_l2(ours.row(pos), ref_row.row(0), n_vocab), kF32Tolerance.max_rel_l2)
                << "step " << s << ", chunk " << chunk;
            if (chosen != ref.tokens[size_t(s)]) {
                const bool tie = near_tie(ref_row.row(0), n_vocab, size_t(chosen), size_t(ref.tokens[size_t(s)]),
                                          kF32Tolerance.max_rel_l2);
                EXPECT_TRUE(tie) << "greedy step " << s << " (chunk " << chunk << "): ds4 picks " << chosen
                                 << ", llama.cpp picks " << ref.tokens[size_t(s)] << " by a clear margin";
                if (tie) std::printf("step %d: near-tie between %d and %d, accepted\n", s, chosen, ref.tokens[size_t(s)]);
            }
        }
        std::printf("chunk %d: ds4 greedy %s\n", chunk, join_ids(ds4_tokens).c_str());
    }
}

// ---- (d) a model written by ds4-gguf synth ------------------------------------------

// The synthesizer is ds4 code, so llama.cpp is the judge here: it must load
// the file and agree with ds4 on it. A missing ds4-gguf fails this test.
TEST_F(Qwen3Moe, SynthTinyPresetMatchesLlama) {
    const fs::path m = dir_ / "synth-tiny.gguf";
    run_checked({ds4_program("ds4-gguf").string(), "synth", "--arch", kArch, "--preset", "tiny", "--out", m.string()});
    const GgufSummary s = read_gguf_summary(m);
    ASSERT_EQ(s.arch, kArch);
    if (s.any_quantized()) {
        const fs::path deq = dequantize(m, dir_ / "synth-deq.gguf");
        expect_matches_at_every_chunk(m, deq, kQuantTolerance);
    } else {
        expect_matches_at_every_chunk(m, m, kF32Tolerance);
    }
}

}  // namespace
}  // namespace ds4::oracle

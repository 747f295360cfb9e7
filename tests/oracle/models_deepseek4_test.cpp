// DeepSeek V4 (deepseek4): ds4 against llama.cpp's library on random-weight
// models from llama.cpp's own generator (test-llama-archs), with a fresh seed
// and fresh token ids every run (DS4_TEST_SEED=N re-runs one). All cases but
// GeneratorScale run on the file redrawn at a trained checkpoint's magnitudes
// (llama_realistic: norm gains ~1, matrices N(0, 1/fan_in), embeddings,
// sinks, hyper-connection bases and compressor position embeddings N(0, 1)),
// so attention, sinks and routing are far from uniform. Prompts are 300-340 tokens: past the
// sliding window (32 positions in the generator's config), through ~80
// ratio-4 blocks and two ratio-128 blocks; the generator's layer schedule
// is compress ratios {0, 0, 4, 128}, so window-only, CSA (compressor +
// lightning indexer) and HCA layers all run.
//
//   routed:   the F32 file rewritten (llama_dsv4_rewrite) to 8 experts with 3
//             used, hash-routed first 2 layers (random token -> experts table)
//             and indexer top-k 8, so scored routing with its bias, hash
//             routing and the indexer's block selection all change the
//             logits; per position rel L2 <= 1e-4, same argmax, at
//             --prefill-chunk 1, 7, 64 and the whole prompt.
//   synth:    `ds4-gguf synth --arch deepseek4 --preset tiny` (schedule
//             {0,0,4,128,4}, 3 hash layers, top-k 16, 20 Sinkhorn iterations,
//             the real vocabulary) judged by llama.cpp, whole prompt.
//   scales:   the generator's file with them: llama.cpp's deepseek4 graph
//             passes no scale tensors to build_lora_mm / build_moe_ffn /
//             build_ffn (the loader reads them generically, the graph ignores
//             them), and uses exp_probs_b_vl only for image embeddings, so ds4
//             ignores them too and must give the same logits.
//   quant:    a rewritten file (1 hash layer, top-k 8) quantized like
//             the published q2 files (routed gate/up IQ2_XXS with a uniform
//             importance matrix, down Q2_K, Q8_0 elsewhere) vs llama.cpp on
//             the same file dequantized to F32: the F32 bound (both do float
//             arithmetic on the same weights).
//   long:     2,000-5,000 tokens (past ds4's default 4096-token prefill chunk
//             when long enough) at random chunk sizes: hundreds of ratio-4
//             rows, so the indexer's top-k picks 8 of up to 1,250 candidates,
//             and dozens of ratio-128 rows.
// tests/oracle/mutation_test.cpp shows these bounds and stimuli fail for
// planted bugs (RoPE base off by 1%, the window off by one, two experts
// swapped, the indexer's top-k off by one).
//
// Prompts are drawn so that none of llama.cpp's top-k choices (router,
// indexer) is within rounding of a tie (clearly_decided_reference), so the
// F32 bound holds at every position and chunking.
//
// llama_logits runs llama.cpp with an F32 KV cache and no flash attention;
// deepseek4's compressor state planes are always F32 in llama.cpp
// (llama_dsv4_comp_state), and its compressed/indexer caches take the same
// F32 K type, so there is no cache quantization on the reference side. The
// indexer's Hadamard rotation (always on for deepseek4's indexer cache) is
// orthogonal and does not change the q.k scores ds4 ranks by.
#include "oracle_harness.h"

namespace ds4::oracle {
namespace {

constexpr const char* kArch = "deepseek4";

class DeepSeek4 : public ::testing::Test {
protected:
    void SetUp() override {
        seed_ = fresh_seed();
        rng_.seed(seed_);
        trace_.emplace(__FILE__, __LINE__,
                       "seed " + std::to_string(seed_) + " (model seed " + std::to_string(model_seed(seed_)) +
                           "; DS4_TEST_SEED=" + std::to_string(seed_) + " re-runs it, DS4_KEEP_TEMP=1 keeps " +
                           dir_.path().string() + ")");
    }

    uint32_t mseed() const { return model_seed(seed_); }
    fs::path raw_model() { return generate_arch_model(kArch, mseed(), dir_.path()); }
    fs::path stripped_model() { return strip_scales(raw_model(), dir_ / "stripped.gguf"); }
    fs::path routed_model(const Dsv4Rewrite& r = {}) { return realistic_deepseek4(dir_.path(), mseed(), r); }

    std::vector<int32_t> tokens(size_t n_vocab, size_t lo, size_t hi) {
        std::uniform_int_distribution<size_t> n(lo, hi);
        return random_token_ids(rng_, n(rng_), int32_t(n_vocab));
    }

    // ds4 at each prefill chunk size (0: the whole prompt) against one
    // llama.cpp run on `ref_model`, on a prompt of lo..hi tokens.
    void expect_matches(const fs::path& model, const fs::path& ref_model, std::vector<int> chunks, size_t lo = 300,
                        size_t hi = 340) {
        const size_t n_vocab = size_t(read_gguf_summary(model).n_vocab);
        const auto [ids, ref] = clearly_decided_reference(ref_model, tokens(n_vocab, lo, hi), n_vocab, dir_.path(), rng_);
        for (int chunk : chunks) {
            if (chunk == 0) chunk = int(ids.size());
            SCOPED_TRACE("--prefill-chunk " + std::to_string(chunk) + ", " + std::to_string(ids.size()) +
                         " tokens: " + join_ids(ids));
            const Logits ours = engine_logits(Engine::ds4, model, ids, n_vocab, dir_.path(), {2, chunk});
            EXPECT_TRUE(logits_match(ours, ref, kF32Tolerance, "ds4 (chunk " + std::to_string(chunk) + ") vs llama.cpp"));
        }
    }

    TempDir dir_;
    uint64_t seed_ = 0;
    std::mt19937_64 rng_;
    std::optional<::testing::ScopedTrace> trace_;
};

bool is_hash_table(const std::string& name) { return name.find("ffn_gate_tid2eid") != std::string::npos; }

TEST_F(DeepSeek4, RoutedHashAndIndexerMatchLlamaAtEveryChunk) {
    const fs::path m = routed_model();
    ASSERT_EQ(read_gguf_summary(m).count_if_name(is_hash_table), size_t(Dsv4Rewrite{}.hash_layers));
    expect_matches(m, m, {0, 1, 7, 64});
}

// The one case on the generator's own magnitudes (every tensor N(0, 0.1)).
TEST_F(DeepSeek4, GeneratorScaleMatchesLlama) {
    const fs::path m = dsv4_rewrite(stripped_model(), dir_ / "gen-scale.gguf", Dsv4Rewrite{}, mseed());
    expect_matches(m, m, {0, 7});
}

// Long prompts: 2,000-5,000 positions at a random small chunk, a random
// large one and whole (ds4's default chunk is 4096, so long prompts also
// cross it).
TEST_F(DeepSeek4, LongPromptMatchesLlama) {
    const fs::path m = routed_model();
    const int small = std::uniform_int_distribution<int>(29, 300)(rng_);
    const int large = std::uniform_int_distribution<int>(700, 2100)(rng_);
    expect_matches(m, m, {small, large, 0}, 2000, 5000);
}

// The synthesizer is ds4 code, so llama.cpp is the judge: the `tiny` preset
// (its own layer schedule, hash layers, indexer top-k and Sinkhorn depth,
// the real 129,280-token vocabulary) must load there and give ds4's logits.
TEST_F(DeepSeek4, SynthTinyPresetMatchesLlama) {
    const fs::path m = dir_ / "synth-tiny.gguf";
    run_checked({ds4_program("ds4-gguf").string(), "synth", "--arch", kArch, "--preset", "tiny", "--out", m.string()});
    const GgufSummary s = read_gguf_summary(m);
    ASSERT_EQ(s.arch, kArch);
    ASSERT_FALSE(s.any_quantized()) << "the tiny preset is expected to be F32";
    expect_matches(m, m, {0});
}

TEST_F(DeepSeek4, F32WithScaleTensorsMatchesLlama) {
    const fs::path m = realistic(raw_model(), dir_ / "scales.gguf", mseed());
    ASSERT_GT(read_gguf_summary(m).count_if_name(is_optional_scale_tensor_name), 0u)
        << "test-llama-archs wrote no .scale tensors, so this case would test nothing";
    expect_matches(m, m, {0, 64});
}

TEST_F(DeepSeek4, Q2StyleQuantMatchesLlamaOnDequantizedFile) {
    // The generator's 2 experts (IQ2_XXS quantization is slow: few expert
    // matrices keep this case to seconds), one hash-routed layer, top-k 8.
    const fs::path f32 = routed_model(Dsv4Rewrite{2, 2, 1, 8});
    const fs::path im = write_uniform_imatrix(f32, dir_ / "uniform.imatrix", "_exps.weight");
    const fs::path q = quantize_mixed(f32, dir_ / "q2.gguf", "Q8_0",
                                      {"ffn_gate_exps=iq2_xxs", "ffn_up_exps=iq2_xxs", "ffn_down_exps=q2_k"}, im);
    const GgufSummary s = read_gguf_summary(q);
    ASSERT_TRUE(s.has_tensor_type(GGML_TYPE_IQ2_XXS) && s.has_tensor_type(GGML_TYPE_Q2_K) &&
                s.has_tensor_type(GGML_TYPE_Q8_0))
        << "llama-quantize did not produce the IQ2_XXS / Q2_K / Q8_0 mix";
    const fs::path deq = dequantize(q, dir_ / "q2-deq.gguf");
    expect_matches(q, deq, {0});
}

}  // namespace
}  // namespace ds4::oracle

// GLM-5.x (glm-dsa): ds4 against llama.cpp's library on random-weight models
// from llama.cpp's own generator (test-llama-archs), with a fresh seed and
// fresh token ids every run (DS4_TEST_SEED=N re-runs one). The generator's
// glm-dsa file has 2 blocks (block 0 dense, block 1 MoE), one 192/128-wide
// MLA head over a 512-wide latent, a 64-head lightning indexer, 2 experts
// both used and an indexer top-k above any prompt; llama_glm_rewrite turns
// it into files where the choices matter (16 indexer heads keep decoding
// token by token quick), and llama_realistic redraws it at
// a trained checkpoint's magnitudes (norm gains ~1, matrices N(0, 1/fan_in),
// embeddings N(0, 1)) so attention and routing are far from uniform.
//
//   routed:  8 experts, 3 used, in 4 groups of which 2 are used, normalised
//            and scaled (2.5) routing weights, indexer top-k 32: prompts of
//            300-340 tokens make the indexer pick 32 of up to 340 positions;
//            per position rel L2 <= 1e-4, same argmax, at --prefill-chunk 1,
//            16 and the whole prompt.
//   shared:  the same with block 1 reusing block 0's top-k
//            (attention.indexer.types = 1,0, GLM-5.2's shared indexers).
//   scales:  the generator's `.scale` companions kept (llama.cpp applies them
//            to the attention output, FFN and expert projections).
//   quant:   the routed file quantized to Q8_0 vs llama.cpp on it dequantized
//            to F32, at the F32 bound.
//   synth:   `ds4-gguf synth --arch glm-dsa --preset tiny` (and --n-layer 2)
//            judged by llama.cpp.
//
// Prompts are drawn so that none of llama.cpp's top-k choices (router,
// indexer) is within rounding of a tie (clearly_decided_reference).
// llama_logits runs llama.cpp with an F32 KV cache (its indexer key cache
// takes the same type) and no flash attention. The indexer's Hadamard
// rotation is orthogonal and does not change the q.k scores ds4 ranks by.
#include "oracle_harness.h"

namespace ds4::oracle {
namespace {

constexpr const char* kArch = "glm-dsa";

class GlmDsa : public ::testing::Test {
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

    fs::path routed_model(const GlmRewrite& r = {}) { return realistic_glm_dsa(dir_.path(), mseed(), r); }

    // ds4 at each prefill chunk size (0: the whole prompt) against one
    // llama.cpp run, on a prompt of 300-340 tokens.
    void expect_matches(const fs::path& model, std::vector<int> chunks) {
        expect_matches(model, model, size_t(read_gguf_summary(model).n_vocab), std::move(chunks));
    }
    // ds4 runs `model`, llama.cpp `ref_model` (the same weights, e.g. a
    // quantized file dequantized to F32).
    void expect_matches(const fs::path& model, const fs::path& ref_model, size_t n_vocab, std::vector<int> chunks) {
        std::uniform_int_distribution<size_t> len(300, 340);
        const auto [ids, ref] =
            clearly_decided_reference(ref_model, random_token_ids(rng_, len(rng_), int32_t(n_vocab)), n_vocab, dir_.path(), rng_);
        for (int chunk : chunks) {
            if (chunk == 0) chunk = int(ids.size());
            SCOPED_TRACE("--prefill-chunk " + std::to_string(chunk) + ", " + std::to_string(ids.size()) +
                         " tokens: " + join_ids(ids));
            const Logits ours = engine_logits(Engine::ds4, model, ids, n_vocab, dir_.path(), {2, chunk});
            EXPECT_TRUE(logits_match(ours, ref, kF32Tolerance, "ds4 (chunk " + std::to_string(chunk) + ") vs llama.cpp"));
        }
    }

    // `ds4-gguf synth --arch glm-dsa --preset tiny` with `extra` flags, judged by llama.cpp.
    void expect_synth_matches(const std::vector<std::string>& extra);

    TempDir dir_;
    uint64_t seed_ = 0;
    std::mt19937_64 rng_;
    std::optional<::testing::ScopedTrace> trace_;
};

TEST_F(GlmDsa, RoutedGroupsAndIndexerMatchLlamaAtEveryChunk) { expect_matches(routed_model(), {0, 1, 16}); }

TEST_F(GlmDsa, SharedIndexerMatchesLlama) {
    GlmRewrite r;
    r.indexer_types = "1,0";
    expect_matches(routed_model(r), {0, 16});
}

TEST_F(GlmDsa, F32WithScaleTensorsMatchesLlama) {
    const fs::path raw = raw_model();
    ASSERT_GT(read_gguf_summary(raw).count_if_name(is_optional_scale_tensor_name), 0u)
        << "test-llama-archs wrote no .scale tensors, so this case would test nothing";
    const fs::path rewritten = glm_rewrite(raw, dir_ / "scales-rewritten.gguf", {}, mseed());
    expect_matches(realistic(rewritten, dir_ / "scales.gguf", mseed()), {0});
}

// A Q8_0 file (llama-quantize) against llama.cpp on the same file
// dequantized to F32: both do float arithmetic on the same weights, so the
// F32 bound holds (llama.cpp's own Q8_0 path quantizes activations too and
// is no reference).
TEST_F(GlmDsa, Q8_0MatchesLlamaOnDequantizedFile) {
    const fs::path q = quantize(routed_model(), dir_ / "q8_0.gguf", "Q8_0");
    ASSERT_TRUE(read_gguf_summary(q).has_tensor_type(GGML_TYPE_Q8_0)) << "llama-quantize wrote no Q8_0 tensor";
    const fs::path deq = dequantize(q, dir_ / "q8_0-deq.gguf");
    expect_matches(q, deq, size_t(read_gguf_summary(q).n_vocab), {0});
}

// The synthesizer is ds4 code, so llama.cpp is the judge: the `tiny` preset
// (a dense block, MoE blocks with 4 expert groups, a block reusing the
// previous block's indexer, top-k 16, an MTP block llama.cpp loads and
// skips, no tokenizer) must load there and give ds4's logits.
TEST_F(GlmDsa, SynthTinyPresetMatchesLlama) {
    expect_synth_matches({});
}

// Truncated to its first 2 blocks (dense, MoE; both with their own
// indexer) and the MTP block, renumbered after them.
TEST_F(GlmDsa, SynthTinyTruncatedMatchesLlama) { expect_synth_matches({"--n-layer", "2"}); }

void GlmDsa::expect_synth_matches(const std::vector<std::string>& extra) {
    const fs::path m = dir_ / "synth-tiny.gguf";
    std::vector<std::string> argv = {ds4_program("ds4-gguf").string(), "synth", "--arch", kArch, "--preset", "tiny",
                                     "--no-tokenizer", "--seed", std::to_string(mseed()), "--out", m.string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    run_checked(argv);
    // Tokenizer-less: the vocabulary is glm-dsa.vocab_size.
    gguf_init_params params{/*no_alloc=*/true, nullptr};
    gguf_context* g = gguf_init_from_file(m.c_str(), params);
    ASSERT_NE(g, nullptr) << "ggml cannot read " << m;
    const int64_t k = gguf_find_key(g, "glm-dsa.vocab_size");
    const size_t n_vocab = k >= 0 ? gguf_get_val_u32(g, k) : 0;
    gguf_free(g);
    ASSERT_GT(n_vocab, 0u) << m << " has no glm-dsa.vocab_size";
    expect_matches(m, m, n_vocab, {0, 16});
}

}  // namespace
}  // namespace ds4::oracle

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
//            judged by llama.cpp; `--quant q2` (llama-quantize's Q2_K mix
//            with its fallbacks) typed as llama-quantize types the same
//            model, and glm5-mini (GLM-5's width and head sizes: 192-wide
//            attn_k_b rows, stored q4_0) in that mix vs llama.cpp on it
//            dequantized to F32, at the F32 bound.
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

    // `ds4-gguf synth --arch glm-dsa --preset PRESET --no-tokenizer` with
    // this test's model seed and `extra` flags; what it printed in `log`.
    fs::path synth(const std::string& preset, const std::vector<std::string>& extra, const fs::path& out,
                   std::string* log = nullptr) {
        std::vector<std::string> argv = {ds4_program("ds4-gguf").string(), "synth", "--arch", kArch, "--preset",
                                         preset, "--no-tokenizer", "--seed", std::to_string(mseed()), "--out",
                                         out.string()};
        argv.insert(argv.end(), extra.begin(), extra.end());
        const CommandResult r = run_checked(argv);
        if (log) *log = r.output;
        return out;
    }

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

// llama-quantize's Q2_K mix, fallbacks included, is what `--quant q2`
// writes: every tensor of the synthesized file has the type llama-quantize
// gives it when it quantizes the same model's F32 file to Q2_K. glm5-mini
// has GLM-5's mix (q2_K, q3_K ffn_down and attn_output, a q6_K head) and
// its one fallback: the 192-wide attn_k_b rows as q4_0. tiny's 64-wide rows
// and 8 experts (llama.cpp's Mixtral rules) take others: q4_0 for q2_K
// and q3_K, q5_1 for attn_output's q5_K (and the head's q8_0 rule). Each fallback
// is named once per tensor kind, not once per block.
TEST_F(GlmDsa, SynthQ2MixIsLlamaQuantizesQ2_K) {
    struct Case {
        const char* preset;
        std::vector<std::pair<const char*, ggml_type>> fallbacks;  // tensor kind, its type in every block
    };
    const Case cases[] = {
        {"glm5-mini", {{"attn_k_b.weight", GGML_TYPE_Q4_0}}},
        {"tiny", {{"attn_k_b.weight", GGML_TYPE_Q4_0}, {"attn_output.weight", GGML_TYPE_Q5_1},
                  {"attn_q_a.weight", GGML_TYPE_Q4_0}}},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(std::string("preset ") + c.preset);
        // One trunk block (dense) and the MTP block (MoE): every tensor kind.
        const fs::path f32 = synth(c.preset, {"--n-layer", "1"}, dir_ / (std::string(c.preset) + "-f32.gguf"));
        const auto want = gguf_tensor_types(quantize(f32, dir_ / (std::string(c.preset) + "-ref-q2.gguf"), "Q2_K"));
        std::string log;
        const fs::path ours =
            synth(c.preset, {"--n-layer", "1", "--quant", "q2"}, dir_ / (std::string(c.preset) + "-q2.gguf"), &log);
        const auto got = gguf_tensor_types(ours);
        ASSERT_EQ(want.size(), got.size());
        for (const auto& [name, type] : want) {
            auto it = got.find(name);
            ASSERT_NE(it, got.end()) << name << " is missing from the synthetic file";
            EXPECT_EQ(ggml_type_name(it->second), std::string(ggml_type_name(type))) << name;
        }
        for (const auto& [kind, type] : c.fallbacks) {
            for (int b = 0; b < 2; ++b) {  // the trunk block and the MTP block
                const std::string name = "blk." + std::to_string(b) + "." + kind;
                ASSERT_TRUE(got.count(name)) << name;
                EXPECT_EQ(ggml_type_name(got.at(name)), std::string(ggml_type_name(type))) << name;
            }
            size_t lines = 0;
            for (size_t at = log.find(std::string(": ") + kind + " has rows of "); at != std::string::npos;
                 at = log.find(std::string(": ") + kind + " has rows of ", at + 1))
                ++lines;
            EXPECT_EQ(lines, 1u) << "ds4-gguf's fallback lines for " << kind << ":\n" << log;
        }
    }
}

// GLM-5's head geometry in llama-quantize's Q2_K mix (q2_K, q3_K, q6_K and
// the 192-wide attn_k_b rows as q4_0) against llama.cpp on the same file
// dequantized to F32: ds4 decodes every block exactly, so the F32 bound
// holds. Also ggml's own decoders see the synthesizer's random blocks at
// the spread it aims at (1/sqrt(row) for matrices, 1 for the embedding).
// glm5-mini keeps GLM-5's hidden width; GLM-5's own experts are out of
// reach here: one MoE block of 256 experts of 6144 x 2048 is 38 GB
// dequantized to F32. (Measured once by hand with 16 experts of GLM-5's
// size, 64 heads and 4 trunk blocks: 9.8e-7, every argmax.)
TEST_F(GlmDsa, SynthGlm5MiniQ2MatchesLlamaOnDequantizedFile) {
    const fs::path m = synth("glm5-mini", {"--n-layer", "2", "--quant", "q2"}, dir_ / "glm5-mini-q2.gguf");
    const auto types = gguf_tensor_types(m);
    for (int b = 0; b < 3; ++b)
        ASSERT_EQ(types.at("blk." + std::to_string(b) + ".attn_k_b.weight"), GGML_TYPE_Q4_0)
            << "block " << b << "'s attn_k_b is not the q4_0 fallback, so this case would not test it";
    for (ggml_type t : {GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q6_K})
        ASSERT_TRUE(std::any_of(types.begin(), types.end(), [&](const auto& x) { return x.second == t; }))
            << "no " << ggml_type_name(t) << " tensor in " << m;

    ggml_context* data = nullptr;
    gguf_init_params params{/*no_alloc=*/false, &data};
    gguf_context* g = gguf_init_from_file(m.c_str(), params);
    ASSERT_NE(g, nullptr) << "ggml cannot read " << m;
    const int64_t k = gguf_find_key(g, "glm-dsa.vocab_size");
    const size_t n_vocab = k >= 0 ? gguf_get_val_u32(g, k) : 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        const ggml_tensor* t = ggml_get_tensor(data, gguf_get_tensor_name(g, i));
        if (!ggml_is_quantized(t->type)) continue;
        std::vector<float> v(size_t(ggml_nelements(t)));
        ggml_get_type_traits(t->type)->to_float(t->data, v.data(), ggml_nelements(t));
        double sum = 0, sum2 = 0;
        size_t bad = 0;
        for (float x : v) {
            bad += std::isfinite(x) ? 0 : 1;
            sum += x;
            sum2 += double(x) * x;
        }
        const double n = double(v.size()), mean = sum / n, sd = std::sqrt(std::max(0.0, sum2 / n - mean * mean));
        const double target = std::string(t->name) == "token_embd.weight" ? 1.0 : 1.0 / std::sqrt(double(t->ne[0]));
        EXPECT_EQ(bad, 0u) << t->name;
        EXPECT_GT(sd, 0.75 * target) << t->name << " (" << ggml_type_name(t->type) << ") std " << sd;
        EXPECT_LT(sd, 1.33 * target) << t->name << " (" << ggml_type_name(t->type) << ") std " << sd;
        EXPECT_LT(std::fabs(mean), 0.2 * target) << t->name << " (" << ggml_type_name(t->type) << ") mean " << mean;
    }
    gguf_free(g);
    ggml_free(data);
    ASSERT_EQ(n_vocab, 1024u) << m << "'s glm-dsa.vocab_size";
    expect_matches(m, dequantize(m, dir_ / "glm5-mini-q2-deq.gguf"), n_vocab, {0, 16});
}

void GlmDsa::expect_synth_matches(const std::vector<std::string>& extra) {
    const fs::path m = synth("tiny", extra, dir_ / "synth-tiny.gguf");
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

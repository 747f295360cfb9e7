// The synthetic qwen3moe Q4_K_M file against llama.cpp:
//  - every tensor has the type llama-quantize gives it when it quantizes the
//    same model's F32 file to Q4_K_M (the independent reference for the mix,
//    ported in src/synth/q4_k_m_mix.cpp);
//  - ggml's own block decoders (to_float) turn every quantized tensor into
//    finite values with the standard deviation the generator aims at;
//  - llama.cpp loads the file and evaluates it to finite, non-constant logits.
// Two shapes: "tiny" (8 experts: llama.cpp's Mixtral rules, and 64-wide rows
// that force its fallback types) and "tiny-kquant" (256-wide rows, 4
// experts: the plain Q4_K/Q6_K rules). Fresh seed and vocabulary size each run.
#include <ggml.h>
#include <gguf.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "oracle_ggml_ptr.h"
#include "oracle_harness.h"
#include "synth/qwen3moe.h"

namespace {

using namespace ds4::oracle;

fs::path write_synth(const std::string& preset, bool q4_k_m, uint64_t seed, int64_t n_vocab, const fs::path& out) {
    ds4::SynthOptions o;
    o.preset = preset;
    o.out = out.string();
    o.seed = seed;
    o.mix = q4_k_m ? ds4::Qwen3MoeMix::Q4_K_M : ds4::Qwen3MoeMix::Uniform;
    o.type = o.embd_type = ds4::GgmlType::F32;
    o.tokenizer = false;
    o.n_vocab = n_vocab;
    ds4::synth_qwen3moe(o);
    return out;
}

// The generator's target standard deviation: 1/sqrt(fan_in) for matrices
// (fan_in = the row length), 1 for the embedding.
double target_std(const std::string& name, int64_t ne0) {
    return name == "token_embd.weight" ? 1.0 : 1.0 / std::sqrt(static_cast<double>(ne0));
}

class SynthQ4KM : public ::testing::TestWithParam<const char*> {};

TEST_P(SynthQ4KM, TypesMatchLlamaQuantizeAndValuesAreSane) {
    const std::string preset = GetParam();
    const uint64_t seed = fresh_seed();
    std::mt19937_64 rng(seed);
    const int64_t n_vocab = 256 + static_cast<int64_t>(rng() % 512);
    SCOPED_TRACE("preset " + preset + ", " + ds4::test::seed_note(seed) + ", vocab " + std::to_string(n_vocab));
    TempDir dir;

    const fs::path f32 = write_synth(preset, false, seed, n_vocab, dir / "f32.gguf");
    const fs::path ref = quantize(f32, dir / "ref-q4_k_m.gguf", "Q4_K_M");
    const fs::path ours = write_synth(preset, true, seed, n_vocab, dir / "ours-q4_k_m.gguf");

    const auto want = gguf_tensor_types(ref);
    const auto got = gguf_tensor_types(ours);
    ASSERT_EQ(want.size(), got.size());
    size_t quantized = 0;
    for (const auto& [name, type] : want) {
        auto it = got.find(name);
        ASSERT_NE(it, got.end()) << name << " is missing from the synthetic file";
        EXPECT_EQ(ggml_type_name(it->second), std::string(ggml_type_name(type))) << name;
        quantized += ggml_is_quantized(type) ? 1 : 0;
    }
    EXPECT_GT(quantized, want.size() / 2);

    // Dequantize every quantized tensor with ggml's decoders.
    ggml_context* data_ctx = nullptr;
    gguf_init_params params{/*no_alloc=*/false, &data_ctx};
    GgufPtr g(gguf_init_from_file(ours.c_str(), params));
    GgmlPtr data_owner(data_ctx);
    ASSERT_TRUE(g);
    for (int64_t i = 0; i < gguf_get_n_tensors(g.get()); ++i) {
        const char* name = gguf_get_tensor_name(g.get(), i);
        const ggml_tensor* t = ggml_get_tensor(data_ctx, name);
        if (!ggml_is_quantized(t->type)) continue;
        const int64_t n = ggml_nelements(t);
        std::vector<float> v(static_cast<size_t>(n));
        ggml_get_type_traits(t->type)->to_float(t->data, v.data(), n);
        double sum = 0, sum2 = 0;
        int64_t bad = 0;
        for (float x : v) {
            if (!std::isfinite(x)) ++bad;
            sum += x;
            sum2 += double(x) * x;
        }
        EXPECT_EQ(bad, 0) << name << " has non-finite weights";
        const double mean = sum / n, sd = std::sqrt(std::max(0.0, sum2 / n - mean * mean));
        const double target = target_std(name, t->ne[0]);
        EXPECT_GT(sd, 0.75 * target) << name << " (" << ggml_type_name(t->type) << ") std " << sd << ", aimed at " << target;
        EXPECT_LT(sd, 1.33 * target) << name << " (" << ggml_type_name(t->type) << ") std " << sd << ", aimed at " << target;
        EXPECT_LT(std::fabs(mean), 0.2 * target) << name << " mean " << mean;
    }

    // llama.cpp loads and runs it.
    const auto tokens = random_token_ids(rng, 6, static_cast<int32_t>(n_vocab));
    const Logits l = engine_logits(Engine::llama, ours, tokens, static_cast<size_t>(n_vocab), dir.path());
    for (size_t r = 0; r < l.n_tokens; ++r) {
        const float* row = l.row(r);
        double s = 0, s2 = 0;
        for (size_t k = 0; k < l.n_vocab; ++k) {
            ASSERT_TRUE(std::isfinite(row[k])) << "row " << r << " logit " << k;
            s += row[k];
            s2 += double(row[k]) * row[k];
        }
        const double sd = std::sqrt(std::max(0.0, s2 / l.n_vocab - (s / l.n_vocab) * (s / l.n_vocab)));
        EXPECT_GT(sd, 1e-3) << "row " << r << " logits are constant";
    }
}

INSTANTIATE_TEST_SUITE_P(Presets, SynthQ4KM, ::testing::Values("tiny", "tiny-kquant"));

}  // namespace

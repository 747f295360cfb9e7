// llama_realistic IN OUT --seed N: the same F32 model with every float tensor
// redrawn at the magnitudes of a trained checkpoint.
//
// test-llama-archs draws every tensor, norm gains included, from N(0, 0.1):
// RMS norms then scale activations by ~0.1 per norm, attention scores and
// router logits come out nearly uniform, and bugs in RoPE, score scaling or
// routing barely move the logits. Here:
//   *norm.weight              1 + N(0, 0.2)   norm gains around one
//   token_embd.weight         N(0, 1)
//   attn_sinks.weight         N(0, 1)         DeepSeek V4 per-head sink logits
//   *_ape.weight              N(0, 1)         compressor position embeddings
//   *_base.weight, *_scale.weight (hyper-connections)  N(0, 1)
//   exp_probs_b*.bias         N(0, 0.1)       routing bias (a correction, not a score)
//   .scale / .input_scale     U(0.5, 1.5)     optional per-tensor multipliers
//   other matrices (ne[1]>1)  N(0, 1/ne[0])   unit-variance outputs for unit inputs
//   other vectors             N(0, 0.1)
// Integer tensors (hash-routing tables) are copied. Metadata is unchanged.
// Each tensor's values depend on the seed and its name only.
#include "../oracle/oracle_gguf_rewrite.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <random>
#include <string>

namespace {

using ds4::oracle::ends_with;

struct Draw {
    enum Kind { normal, uniform } kind;
    double a, b;  // mean and std, or low and high
};

Draw draw_for(const ggml_tensor& t) {
    const std::string n = t.name;
    if (ends_with(n, ".scale") || ends_with(n, ".input_scale")) return {Draw::uniform, 0.5, 1.5};
    if (ends_with(n, "norm.weight")) return {Draw::normal, 1.0, 0.2};
    if (n == "token_embd.weight") return {Draw::normal, 0.0, 1.0};
    if (ends_with(n, "attn_sinks.weight") || ends_with(n, "_ape.weight")) return {Draw::normal, 0.0, 1.0};
    if (n.find("hc_") != std::string::npos && (ends_with(n, "_base.weight") || ends_with(n, "_scale.weight")))
        return {Draw::normal, 0.0, 1.0};
    if (n.find("exp_probs_b") != std::string::npos) return {Draw::normal, 0.0, 0.1};
    if (t.ne[1] > 1) return {Draw::normal, 0.0, 1.0 / std::sqrt(double(t.ne[0]))};
    return {Draw::normal, 0.0, 0.1};
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5 || std::string(argv[3]) != "--seed") {
        std::fprintf(stderr, "usage: %s IN.gguf OUT.gguf --seed N\n", argv[0]);
        return 1;
    }
    char* end = nullptr;
    const unsigned long long seed = std::strtoull(argv[4], &end, 10);
    if (*end != '\0') {
        std::fprintf(stderr, "llama_realistic: --seed needs an integer, got '%s'\n", argv[4]);
        return 1;
    }
    try {
        int64_t redrawn = 0;
        ds4::oracle::gguf_rewrite(argv[1], argv[2], [&](ggml_tensor& t) {
            if (t.type == GGML_TYPE_I32) return ds4::oracle::TensorAction::keep;
            if (t.type != GGML_TYPE_F32)
                throw std::runtime_error(std::string("tensor ") + t.name + " is " + ggml_type_name(t.type) +
                                         "; llama_realistic rewrites F32 files (quantize afterwards)");
            std::mt19937_64 rng(seed ^ std::hash<std::string>{}(t.name));
            const Draw d = draw_for(t);
            std::normal_distribution<double> normal(d.a, d.b);
            std::uniform_real_distribution<double> uniform(d.a, d.b);
            auto* v = static_cast<float*>(t.data);
            for (int64_t i = 0; i < ggml_nelements(&t); ++i)
                v[i] = float(d.kind == Draw::normal ? normal(rng) : uniform(rng));
            ++redrawn;
            return ds4::oracle::TensorAction::keep;
        });
        std::fprintf(stderr, "llama_realistic: %lld tensors redrawn\n", static_cast<long long>(redrawn));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "llama_realistic: %s\n", e.what());
        return 1;
    }
    return 0;
}

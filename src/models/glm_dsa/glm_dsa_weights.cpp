#include "models/glm_dsa/glm_dsa_weights.h"

#include <string>

#include "common/error.h"
#include "models/weights.h"

namespace ds4 {

namespace {

// Expected sizes with the metadata they come from, for messages.
struct GlmDims {
    Dim E, V, QL, KVL, Q, KVA, NOPE, DV, H, O, IQ, IK, IH, F, FE, FS, X;
};

GlmDims dims(const Hparams& meta, const GlmDsaHparams& hp) {
    auto k = [&](const char* key) { return meta.quoted(key); };
    const std::string heads = k("attention.head_count"), kl = k("attention.key_length_mla");
    const std::string vl = k("attention.value_length_mla"), rot = k("rope.dimension_count");
    const std::string kv = k("attention.kv_lora_rank"), ih = k("attention.indexer.head_count");
    const std::string il = k("attention.indexer.key_length"), fe = k("expert_feed_forward_length");
    return GlmDims{
        {hp.n_embd, k("embedding_length")},
        {hp.n_vocab, "the rows of 'token_embd.weight'"},
        {hp.q_lora_rank, k("attention.q_lora_rank")},
        {hp.kv_lora_rank, kv},
        {int64_t(hp.n_head) * hp.head_dim_k, heads + " x " + kl},
        {hp.kv_lora_rank + hp.n_rot, kv + " + " + rot},
        {hp.n_nope(), kl + " - " + rot},
        {hp.head_dim_v, vl},
        {hp.n_head, heads},
        {int64_t(hp.n_head) * hp.head_dim_v, heads + " x " + vl},
        {int64_t(hp.indexer_n_head) * hp.indexer_head_dim, ih + " x " + il},
        {hp.indexer_head_dim, il},
        {hp.indexer_n_head, ih},
        {hp.n_ff, k("feed_forward_length")},
        {hp.n_ff_exp, fe},
        {hp.n_ff_exp * hp.n_expert_shared, fe + " x " + k("expert_shared_count")},
        {hp.n_expert, k("expert_count")},
    };
}

// The attention and the FFN of one block (trunk or MTP).
GlmDsaLayerWeights bind_block(WeightBinder& wb, const GlmDsaHparams& hp, const GlmDims& d, int l, bool full_indexer) {
    const std::string p = "blk." + std::to_string(l) + ".";
    auto scaled = [&](const std::string& name, std::initializer_list<Dim> ne, const Dim& scale_n) {
        GlmScaled s;
        s.w = wb.require(p + name + ".weight", ne);
        s.scale = wb.optional_scale(p + name + ".scale", scale_n);
        return s;
    };
    GlmDsaLayerWeights L;
    L.attn_norm = wb.require(p + "attn_norm.weight", {d.E});
    L.wq_a = wb.require(p + "attn_q_a.weight", {d.E, d.QL});
    L.q_a_norm = wb.require(p + "attn_q_a_norm.weight", {d.QL});
    L.wq_b = wb.require(p + "attn_q_b.weight", {d.QL, d.Q});
    L.wkv_a = wb.require(p + "attn_kv_a_mqa.weight", {d.E, d.KVA});
    L.kv_a_norm = wb.require(p + "attn_kv_a_norm.weight", {d.KVL});
    L.wk_b = wb.require(p + "attn_k_b.weight", {d.NOPE, d.KVL, d.H});
    L.wv_b = wb.require(p + "attn_v_b.weight", {d.KVL, d.DV, d.H});
    L.wo = scaled("attn_output", {d.O, d.E}, 1);
    // llama.cpp loads indexer tensors wherever present but reads them only
    // in full-indexer blocks; there they are required.
    auto indexer = [&](const std::string& name, std::initializer_list<Dim> ne) {
        return full_indexer ? wb.require(p + name, ne) : wb.optional(p + name, ne);
    };
    L.indexer_q_b = indexer("indexer.attn_q_b.weight", {d.QL, d.IQ});
    L.indexer_k = indexer("indexer.attn_k.weight", {d.E, d.IK});
    L.indexer_k_norm = indexer("indexer.k_norm.weight", {d.IK});
    L.indexer_k_norm_b = indexer("indexer.k_norm.bias", {d.IK});
    L.indexer_proj = indexer("indexer.proj.weight", {d.E, d.IH});

    L.ffn_norm = wb.require(p + "ffn_norm.weight", {d.E});
    if (l < hp.n_dense_lead) {
        L.gate = scaled("ffn_gate", {d.E, d.F}, 1);
        L.up = scaled("ffn_up", {d.E, d.F}, 1);
        L.down = scaled("ffn_down", {d.F, d.E}, 1);
        return L;
    }
    L.gate_inp = wb.require(p + "ffn_gate_inp.weight", {d.E, d.X});
    L.exp_probs_b = wb.optional(p + "exp_probs_b.bias", {d.X});
    RoutedExperts& ex = L.experts;
    ex.layer = l;
    ex.gate = wb.require(p + "ffn_gate_exps.weight", {d.E, d.FE, d.X});
    ex.up = wb.require(p + "ffn_up_exps.weight", {d.E, d.FE, d.X});
    ex.down = wb.require(p + "ffn_down_exps.weight", {d.FE, d.E, d.X});
    ex.gate_scale = wb.optional_scale(p + "ffn_gate_exps.scale", d.X);
    ex.up_scale = wb.optional_scale(p + "ffn_up_exps.scale", d.X);
    ex.down_scale = wb.optional_scale(p + "ffn_down_exps.scale", d.X);
    L.gate_shexp = scaled("ffn_gate_shexp", {d.E, d.FS}, 1);
    L.up_shexp = scaled("ffn_up_shexp", {d.E, d.FS}, 1);
    L.down_shexp = scaled("ffn_down_shexp", {d.FS, d.E}, 1);
    return L;
}

}  // namespace

GlmDsaWeights bind_glm_dsa_weights(const GgufFile& f, ModelMap& map, GlmDsaHparams& hp, int first, int last,
                                   bool has_head, bool resident_experts) {
    const Hparams meta(f, "glm-dsa");
    WeightBinder wb(f, map);
    wb.experts_resident(resident_experts);
    GlmDsaWeights w;
    hp.n_vocab = bind_vocab_size(meta, wb);
    const GlmDims d = dims(meta, hp);

    // A stage binds the embedding only when it starts at block 0, the head
    // only when it owns it (tied embeddings: the embedding serves as the
    // head there too).
    const bool tied = f.find_tensor("output.weight") == nullptr;
    wb.bind_data(first == 0 || (has_head && tied));
    w.tok_embd = wb.require("token_embd.weight", {d.E, d.V});
    wb.bind_data(has_head);
    w.output_norm = wb.require("output_norm.weight", {d.E});
    w.output = tied ? w.tok_embd : wb.require("output.weight", {d.E, d.V});
    wb.bind_data(true);
    for (int l = first; l < last; ++l) w.layers.push_back(bind_block(wb, hp, d, l, hp.indexer_full[size_t(l)]));

    // MTP blocks: a file may carry them (llama.cpp drafts with them) or
    // leave them to a separate file; their shapes are checked, their bytes
    // never bound. A block's indexer is unused there, so optional.
    wb.bind_data(false);
    const bool has_mtp = f.find_tensor("blk." + std::to_string(hp.n_layer) + ".nextn.eh_proj.weight") != nullptr;
    for (int l = hp.n_layer; has_mtp && l < hp.n_layer_all; ++l) {
        bind_block(wb, hp, d, l, /*full_indexer=*/false);
        const std::string p = "blk." + std::to_string(l) + ".nextn.";
        const Dim E2{2 * hp.n_embd, "2 x " + meta.quoted("embedding_length")};
        wb.require(p + "eh_proj.weight", {E2, d.E});
        wb.require(p + "enorm.weight", {d.E});
        wb.require(p + "hnorm.weight", {d.E});
        wb.optional(p + "embed_tokens.weight", {d.E, d.V});
        wb.optional(p + "shared_head_head.weight", {d.E, d.V});
        wb.optional(p + "shared_head_norm.weight", {d.E});
    }
    return w;
}

}  // namespace ds4

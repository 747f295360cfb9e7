#include "models/deepseek4/dsv4_weights.h"

#include <cstring>
#include <string>

#include "common/error.h"
#include "models/weights.h"

namespace ds4 {

namespace {

// The routing kernels read the hash table's ids without checks, so they are
// all checked once here (a few MB per hash layer).
void check_hash_table(const WeightRef& t, const Dsv4Hparams& hp) {
    if (!t.data) return;
    const int64_t n = t.ne[0] * t.ne[1];
    for (int64_t i = 0; i < n; ++i) {
        int32_t e;
        std::memcpy(&e, t.data + i * 4, 4);
        if (e < 0 || e >= hp.n_expert)
            throw Error(hp.path + ": hash-routing table '" + t.name + "' sends token " +
                        std::to_string(i / t.ne[0]) + " to expert " + std::to_string(e) + ", but the model has " +
                        std::to_string(hp.n_expert) + " experts.");
    }
}

}  // namespace

Dsv4Weights bind_dsv4_weights(const GgufFile& f, ModelMap& map, Dsv4Hparams& hp, int first, int last,
                              bool has_head, bool resident_experts) {
    const Hparams meta(f, "deepseek4");
    WeightBinder wb(f, map);
    wb.experts_resident(resident_experts);
    Dsv4Weights w;
    hp.n_vocab = bind_vocab_size(meta, wb);

    // Expected sizes with the metadata they come from, for messages.
    auto k = [&](const char* key) { return meta.quoted(key); };
    const std::string heads = k("attention.head_count"), head_len = k("attention.key_length");
    const std::string groups = k("attention.output_group_count"), o_rank = k("attention.output_lora_rank");
    const std::string streams = k("hyper_connection.count"), q_rank = k("attention.q_lora_rank");
    const std::string idx_len = k("attention.indexer.key_length");
    const int64_t hc = hp.n_hc, D = hp.head_dim, Di = hp.indexer_head_dim;
    const Dim E{hp.n_embd, k("embedding_length")};
    const Dim V{hp.n_vocab, "the rows of 'token_embd.weight'"};
    const Dim HC{hc, streams};
    const Dim hc_dim{hc * hp.n_embd, streams + " x " + k("embedding_length")};
    const Dim mix_dim{(2 + hc) * hc, "(2 + " + streams + ") x " + streams};
    const Dim head{D, head_len};
    const Dim QL{hp.q_lora_rank, q_rank};
    const Dim Q{int64_t(hp.n_head) * D, heads + " x " + head_len};
    const Dim H{hp.n_head, heads};
    const Dim group_in{int64_t(hp.n_head) * D / hp.o_groups, heads + " x " + head_len + " / " + groups};
    const Dim OL{hp.o_lora_rank, o_rank}, G{hp.o_groups, groups};
    const Dim OLG{hp.o_groups * hp.o_lora_rank, groups + " x " + o_rank};
    const Dim IH{hp.indexer_n_head, k("attention.indexer.head_count")};
    const Dim IQ{int64_t(hp.indexer_n_head) * Di, k("attention.indexer.head_count") + " x " + idx_len};
    const Dim idx_head{Di, idx_len}, idx_pair{2 * Di, "2 x " + idx_len};
    const Dim X{hp.n_expert, k("expert_count")};
    const Dim used{hp.n_expert_used, k("expert_used_count")};

    // A stage binds the embedding only when it starts at block 0, the head
    // (with its hyper-connection collapse) only when it owns it: with the
    // last block, or on a coordinator that applies it to what the route returns.
    wb.bind_data(first == 0);
    w.tok_embd = wb.require("token_embd.weight", {E, V});
    wb.bind_data(has_head);
    w.output_norm = wb.require("output_norm.weight", {E});
    w.output = wb.require("output.weight", {E, V});
    w.hc_head.fn = wb.require("output_hc_fn.weight", {hc_dim, HC});
    w.hc_head.base = wb.require("output_hc_base.weight", {HC});
    w.hc_head.scale = wb.require("output_hc_scale.weight", {1});
    wb.bind_data(true);

    const bool ff_given = f.find(meta.key("expert_feed_forward_length")) != nullptr;
    for (int l = first; l < last; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        Dsv4LayerWeights L;
        auto hcw = [&](const std::string& site) {
            Dsv4HcWeights h;
            h.fn = wb.require(p + "hc_" + site + "_fn.weight", {hc_dim, mix_dim});
            h.base = wb.require(p + "hc_" + site + "_base.weight", {mix_dim});
            h.scale = wb.require(p + "hc_" + site + "_scale.weight", {3});
            return h;
        };
        L.hc_attn = hcw("attn");
        L.hc_ffn = hcw("ffn");
        L.attn_norm = wb.require(p + "attn_norm.weight", {E});
        L.attn_sinks = wb.require(p + "attn_sinks.weight", {H});
        L.wq_a = wb.require(p + "attn_q_a.weight", {E, QL});
        L.q_a_norm = wb.require(p + "attn_q_a_norm.weight", {QL});
        L.wq_b = wb.require(p + "attn_q_b.weight", {QL, Q});
        L.wkv = wb.require(p + "attn_kv.weight", {E, head});
        L.kv_norm = wb.require(p + "attn_kv_a_norm.weight", {head});
        // Published files store wo_a 2-D as [group_in, rank * groups]; the
        // bytes are the same as the 3-D [group_in, rank, groups] layout.
        const std::string wo_a = p + "attn_output_a.weight";
        const GgufTensorInfo& woa = f.require_tensor(wo_a);
        if (woa.n_dims <= 2) {
            L.wo_a = wb.require(wo_a, {group_in, OLG});
            L.wo_a.ne[1] = hp.o_lora_rank;
            L.wo_a.ne[2] = hp.o_groups;
            L.wo_a.matrix_bytes = L.wo_a.row_bytes * static_cast<size_t>(hp.o_lora_rank);
        } else {
            L.wo_a = wb.require(wo_a, {group_in, OL, G});
        }
        L.wo_b = wb.require(p + "attn_output_b.weight", {OLG, E});

        const int ratio = hp.compress_ratios[static_cast<size_t>(l)];
        if (ratio != 0) {
            // Ratio 4 pools two overlapping windows: twice the width.
            const bool csa = ratio == kDsv4CsaRatio;
            const Dim width{(csa ? 2 : 1) * D, (csa ? "2 x " : "") + head_len};
            const Dim R{ratio, k("attention.compress_ratios")};
            L.compressor.wkv = wb.require(p + "attn_compressor_kv.weight", {E, width});
            L.compressor.wgate = wb.require(p + "attn_compressor_gate.weight", {E, width});
            L.compressor.ape = wb.require(p + "attn_compressor_ape.weight", {width, R});
            L.compressor.norm = wb.require(p + "attn_compressor_norm.weight", {head});
            if (csa) {
                L.indexer_proj = wb.require(p + "indexer.proj.weight", {E, IH});
                L.indexer_q_b = wb.require(p + "indexer.attn_q_b.weight", {QL, IQ});
                L.indexer_compressor.wkv = wb.require(p + "indexer_compressor_kv.weight", {E, idx_pair});
                L.indexer_compressor.wgate = wb.require(p + "indexer_compressor_gate.weight", {E, idx_pair});
                L.indexer_compressor.ape = wb.require(p + "indexer_compressor_ape.weight", {idx_pair, R});
                L.indexer_compressor.norm = wb.require(p + "indexer_compressor_norm.weight", {idx_head});
            }
        }

        L.ffn_norm = wb.require(p + "ffn_norm.weight", {E});
        L.gate_inp = wb.require(p + "ffn_gate_inp.weight", {E, X});
        if (l < hp.n_hash_layers) {
            L.tid2eid = wb.require_i32(p + "ffn_gate_tid2eid.weight", {used, V});
            check_hash_table(L.tid2eid, hp);
        } else
            L.exp_probs_b = wb.require(p + "exp_probs_b.bias", {X});
        // The expert width: stated by the file, or that of this layer's tensors.
        const std::string gate = p + "ffn_gate_exps.weight";
        const int64_t n_ff = ff_given ? meta.count("expert_feed_forward_length") : wb.dim(gate, 1);
        const Dim F{n_ff, ff_given ? k("expert_feed_forward_length") : "dimension 1 of '" + gate + "'"};
        L.experts.layer = l;
        L.experts.gate = wb.require(gate, {E, F, X});
        L.experts.up = wb.require(p + "ffn_up_exps.weight", {E, F, X});
        L.experts.down = wb.require(p + "ffn_down_exps.weight", {F, E, X});
        const Dim FS{n_ff * hp.n_expert_shared, F.from + " x " + k("expert_shared_count")};
        L.gate_shexp = wb.require(p + "ffn_gate_shexp.weight", {E, FS});
        L.up_shexp = wb.require(p + "ffn_up_shexp.weight", {E, FS});
        L.down_shexp = wb.require(p + "ffn_down_shexp.weight", {FS, E});
        w.layers.push_back(std::move(L));
    }
    return w;
}

}  // namespace ds4

#include "models/deepseek4/dsv4_weights.h"

#include "common/error.h"
#include "models/weights.h"

namespace ds4 {

Dsv4Weights bind_dsv4_weights(const GgufFile& f, ModelMap& map, Dsv4Hparams& hp, int first, int last) {
    WeightBinder wb(f, map);
    Dsv4Weights w;
    const GgufTensorInfo& emb = f.require_tensor("token_embd.weight");
    hp.n_vocab = emb.ne[1];
    const int64_t E = hp.n_embd, D = hp.head_dim, hc = hp.n_hc;
    const int64_t hc_dim = hc * E, mix_dim = (2 + hc) * hc;
    w.tok_embd = wb.require("token_embd.weight", {E, hp.n_vocab});
    w.output_norm = wb.require("output_norm.weight", {E});
    w.output = wb.require("output.weight", {E, hp.n_vocab});
    w.hc_head.fn = wb.require("output_hc_fn.weight", {hc_dim, hc});
    w.hc_head.base = wb.require("output_hc_base.weight", {hc});
    w.hc_head.scale = wb.require("output_hc_scale.weight", {1});

    const int64_t group_in = int64_t(hp.n_head) * D / hp.o_groups;
    const int64_t Di = hp.indexer_head_dim;
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
        L.attn_sinks = wb.require(p + "attn_sinks.weight", {hp.n_head});
        L.wq_a = wb.require(p + "attn_q_a.weight", {E, hp.q_lora_rank});
        L.q_a_norm = wb.require(p + "attn_q_a_norm.weight", {hp.q_lora_rank});
        L.wq_b = wb.require(p + "attn_q_b.weight", {hp.q_lora_rank, int64_t(hp.n_head) * D});
        L.wkv = wb.require(p + "attn_kv.weight", {E, D});
        L.kv_norm = wb.require(p + "attn_kv_a_norm.weight", {D});
        // Published files store wo_a 2-D as [group_in, rank * groups]; the
        // bytes are the same as the 3-D [group_in, rank, groups] layout.
        const std::string wo_a = p + "attn_output_a.weight";
        const GgufTensorInfo& woa = f.require_tensor(wo_a);
        if (woa.n_dims <= 2) {
            L.wo_a = wb.require(wo_a, {group_in, hp.o_lora_rank * hp.o_groups});
            L.wo_a.ne[1] = hp.o_lora_rank;
            L.wo_a.ne[2] = hp.o_groups;
            L.wo_a.matrix_bytes = L.wo_a.row_bytes * static_cast<size_t>(hp.o_lora_rank);
        } else {
            L.wo_a = wb.require(wo_a, {group_in, hp.o_lora_rank, hp.o_groups});
        }
        L.wo_b = wb.require(p + "attn_output_b.weight", {hp.o_groups * hp.o_lora_rank, E});

        const int ratio = hp.compress_ratios[static_cast<size_t>(l)];
        if (ratio != 0) {
            const int64_t coff = ratio == kDsv4CsaRatio ? 2 : 1;
            L.compressor.wkv = wb.require(p + "attn_compressor_kv.weight", {E, coff * D});
            L.compressor.wgate = wb.require(p + "attn_compressor_gate.weight", {E, coff * D});
            L.compressor.ape = wb.require(p + "attn_compressor_ape.weight", {coff * D, ratio});
            L.compressor.norm = wb.require(p + "attn_compressor_norm.weight", {D});
            if (ratio == kDsv4CsaRatio) {
                L.indexer_proj = wb.require(p + "indexer.proj.weight", {E, hp.indexer_n_head});
                L.indexer_q_b = wb.require(p + "indexer.attn_q_b.weight", {hp.q_lora_rank, hp.indexer_n_head * Di});
                L.indexer_compressor.wkv = wb.require(p + "indexer_compressor_kv.weight", {E, 2 * Di});
                L.indexer_compressor.wgate = wb.require(p + "indexer_compressor_gate.weight", {E, 2 * Di});
                L.indexer_compressor.ape = wb.require(p + "indexer_compressor_ape.weight", {2 * Di, ratio});
                L.indexer_compressor.norm = wb.require(p + "indexer_compressor_norm.weight", {Di});
            }
        }

        L.ffn_norm = wb.require(p + "ffn_norm.weight", {E});
        L.gate_inp = wb.require(p + "ffn_gate_inp.weight", {E, hp.n_expert});
        if (l < hp.n_hash_layers) {
            const std::string name = p + "ffn_gate_tid2eid.weight";
            const GgufTensorInfo& t = f.require_tensor(name);
            if (t.type != GgmlType::I32 || t.ne[0] != hp.n_expert_used || t.ne[1] != hp.n_vocab || t.ne[2] != 1)
                throw Error(f.path() + ": hash-routing table '" + name + "' must be i32 [" +
                            std::to_string(hp.n_expert_used) + ", " + std::to_string(hp.n_vocab) + "].");
            L.tid2eid = reinterpret_cast<const int32_t*>(map.tensor_data(t));
        } else {
            L.exp_probs_b = wb.require(p + "exp_probs_b.bias", {hp.n_expert});
        }
        const GgufTensorInfo& ge = f.require_tensor(p + "ffn_gate_exps.weight");
        const int64_t n_ff = ge.ne[1];
        L.gate_exps = wb.require(p + "ffn_gate_exps.weight", {E, n_ff, hp.n_expert});
        L.up_exps = wb.require(p + "ffn_up_exps.weight", {E, n_ff, hp.n_expert});
        L.down_exps = wb.require(p + "ffn_down_exps.weight", {n_ff, E, hp.n_expert});
        const int64_t n_ff_sh = n_ff * hp.n_expert_shared;
        L.gate_shexp = wb.require(p + "ffn_gate_shexp.weight", {E, n_ff_sh});
        L.up_shexp = wb.require(p + "ffn_up_shexp.weight", {E, n_ff_sh});
        L.down_shexp = wb.require(p + "ffn_down_shexp.weight", {n_ff_sh, E});
        w.layers.push_back(std::move(L));
    }
    return w;
}

}  // namespace ds4

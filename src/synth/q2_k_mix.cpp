#include "synth/q2_k_mix.h"

namespace ds4 {

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

QuantChoice q2_k_tensor_type(const std::string& name, const std::vector<int64_t>& ne, GgmlType source_type,
                             const QuantMixModel& m) {
    if (!llama_quantizes_tensor(name, ne)) return {source_type, source_type};
    const bool eight_experts = m.n_expert == 8;
    GgmlType t = GgmlType::Q2_K;  // llama_ftype_get_default_type(Q2_K)

    // Categories in tensor_get_category's order of tests. GLM-5's attn_k_b
    // and attn_v_b match none of the attention names ("attn_k_b.weight" is
    // not "attn_k.weight"): they keep the default, and so does the
    // indexer's attn_q_b; its attn_k is an attention-k tensor.
    if (name == "output.weight" || (m.tied_embeddings && name == "token_embd.weight")) {
        t = ne[0] % 256 != 0 ? GgmlType::Q8_0 : GgmlType::Q6_K;
    } else if (name == "token_embd.weight") {
        // The default.
    } else if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") ||
               contains(name, "attn_v.weight")) {
        t = m.n_gqa >= 4 ? GgmlType::Q4_K : GgmlType::Q3_K;
        if (eight_experts) t = GgmlType::Q8_0;
    } else if (contains(name, "attn_k.weight")) {
        if (eight_experts) t = GgmlType::Q8_0;
    } else if (contains(name, "attn_q.weight")) {
        // The default.
    } else if (contains(name, "attn_output.weight")) {
        t = eight_experts ? GgmlType::Q5_K : GgmlType::Q3_K;
    } else if (contains(name, "ffn_up") || contains(name, "ffn_gate")) {
        // The default.
    } else if (contains(name, "ffn_down")) {
        t = GgmlType::Q3_K;
    }
    return {t, llama_block_fallback(t, ne[0])};
}

}  // namespace ds4

#include "synth/q4_k_m_mix.h"

#include "mapping/model_map.h"  // tensor_layer

namespace ds4 {

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// use_more_bits in llama_tensor_get_type_impl: the first and last eighth of
// the layers, and every third layer in between.
bool use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

}  // namespace

GgmlType q4_k_m_tensor_type(const std::string& name, const std::vector<int64_t>& ne, GgmlType source_type,
                            const QuantMixModel& m) {
    if (!llama_quantizes_tensor(name, ne)) return source_type;
    const int64_t ncols = ne[0];
    const bool eight_experts = m.n_expert == 8;
    GgmlType t = GgmlType::Q4_K;  // llama_ftype_get_default_type(Q4_K_M)

    // Categories in tensor_get_category's order of tests.
    if (name == "output.weight" || (m.tied_embeddings && name == "token_embd.weight")) {
        // A head whose rows are not whole 256-blocks becomes Q8_0; else Q6_K.
        t = ncols % 256 != 0 ? GgmlType::Q8_0 : GgmlType::Q6_K;
    } else if (name == "token_embd.weight") {
        // Untied embeddings keep the default type for Q4_K_M.
    } else if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") ||
               contains(name, "attn_v.weight")) {
        // i_attention_wv counts attn_v tensors in file order: one per layer,
        // in layer order, so it is the layer index.
        if (use_more_bits(tensor_layer(name), m.n_layer)) t = GgmlType::Q6_K;
        // (Fused qkv lands here too: this branch comes first.)
        if (eight_experts) t = GgmlType::Q8_0;
    } else if (contains(name, "attn_k.weight")) {
        if (eight_experts) t = GgmlType::Q8_0;
    } else if (contains(name, "attn_q.weight")) {
        // default
    } else if (contains(name, "attn_output.weight")) {
        if (eight_experts) t = GgmlType::Q5_K;
    } else if (contains(name, "ffn_up") || contains(name, "ffn_gate")) {
        // default
    } else if (contains(name, "ffn_down")) {
        // The layer comes from the name (experts of one layer share it).
        if (use_more_bits(tensor_layer(name), m.n_layer)) t = GgmlType::Q6_K;
    }
    return llama_block_fallback(t, ncols);
}

}  // namespace ds4

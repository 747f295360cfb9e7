#include "synth/decode_traffic.h"

#include <string>

#include "mapping/model_map.h"

namespace ds4 {

namespace {

bool is_routed_expert(const std::string& name) {
    return name.ends_with(".ffn_gate_exps.weight") || name.ends_with(".ffn_up_exps.weight") ||
           name.ends_with(".ffn_down_exps.weight");
}

}  // namespace

DecodeWeightBytes decode_weight_bytes(const GgufFile& f, int layer_begin, int layer_end) {
    const std::string arch = f.architecture();
    const double n_expert = static_cast<double>(f.get_uint(arch + ".expert_count").value_or(0));
    const double n_used = static_cast<double>(f.get_uint(arch + ".expert_used_count").value_or(0));
    const double routed_share = n_expert > 0 ? n_used / n_expert : 1.0;
    DecodeWeightBytes d;
    for (const GgufTensorInfo& t : f.tensors()) {
        const int layer = tensor_layer(t.name);
        if (t.name == "token_embd.weight") {
            d.embedding_row = t.n_rows() > 0 ? t.row_bytes() : 0;
        } else if (layer < 0) {
            d.output_head += t.nbytes;
        } else if (layer < layer_begin || layer >= layer_end) {
            continue;
        } else if (is_routed_expert(t.name)) {
            d.routed_experts += routed_share * static_cast<double>(t.nbytes);
        } else if (t.name.ends_with(".ffn_gate_tid2eid.weight")) {
            d.layers_other += t.n_rows() > 0 ? t.row_bytes() : 0;  // one token's expert ids
        } else {
            d.layers_other += t.nbytes;
        }
    }
    d.total = d.routed_experts + static_cast<double>(d.layers_other + d.output_head + d.embedding_row);
    return d;
}

}  // namespace ds4

#include "synth/llama_quant_rules.h"

#include "common/error.h"

namespace ds4 {

bool llama_quantizes_tensor(const std::string& name, const std::vector<int64_t>& ne) {
    int dims = static_cast<int>(ne.size());
    while (dims > 1 && ne[static_cast<size_t>(dims - 1)] == 1) --dims;  // ggml_n_dims
    if (dims < 2) return false;
    auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
    return name.ends_with("weight") && !has("_norm.weight") && !has("ffn_gate_inp.weight") &&
           !has("ffn_gate_tid2eid.weight");
}

GgmlType llama_block_fallback(GgmlType wanted, int64_t ncols) {
    if (ncols % ggml_type_traits(wanted).block_elems == 0) return wanted;
    GgmlType r = wanted;
    switch (wanted) {
        case GgmlType::IQ2_XXS: case GgmlType::IQ2_XS: case GgmlType::IQ2_S: case GgmlType::IQ3_XXS:
        case GgmlType::IQ3_S: case GgmlType::IQ1_S: case GgmlType::IQ1_M: case GgmlType::IQ4_XS:
            r = GgmlType::IQ4_NL;
            break;
        case GgmlType::Q2_0: case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::TQ1_0: case GgmlType::TQ2_0:
            r = GgmlType::Q4_0;
            break;
        case GgmlType::Q4_K: r = GgmlType::Q5_0; break;
        case GgmlType::Q5_K: r = GgmlType::Q5_1; break;
        case GgmlType::Q6_K: r = GgmlType::Q8_0; break;
        default:
            // A 32-block type has nothing smaller to demote to (the F16 check
            // below); llama-quantize refuses a larger block it has no rule for.
            if (ggml_type_traits(wanted).block_elems > 32)
                throw Error("internal: llama-quantize has no fallback for " + std::string(ggml_type_name(wanted)));
            break;
    }
    return ncols % ggml_type_traits(r).block_elems == 0 ? r : GgmlType::F16;
}

}  // namespace ds4

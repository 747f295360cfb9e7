// What every llama-quantize mix shares (src/llama-quant.cpp of llama.cpp
// v0.5.0, under .deps/oracle/llama.cpp): which tensors it quantizes at all,
// the model facts its rules read, and the fallback it takes when a tensor's
// rows are not whole blocks of the type a rule chose. The mixes themselves
// are q4_k_m_mix.h and q2_k_mix.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"

namespace ds4 {

struct QuantMixModel {
    int n_layer = 0;        // hparams.n_layer_all
    int n_expert = 0;       // 8 switches on llama.cpp's Mixtral-era rules
    int n_gqa = 1;          // query heads per KV head (attention-v rules)
    bool tied_embeddings = false;  // no output.weight: token_embd is the head
};

// tensor_allows_quantization: only 2-D/3-D tensors whose name ends in
// "weight", never norms or the expert router (nor DeepSeek V4's token-id
// routing table). The model kinds ds4 synthesizes meet no other exclusion.
bool llama_quantizes_tensor(const std::string& name, const std::vector<int64_t>& ne);

// tensor_type_fallback: `wanted` when a row of `ncols` is whole blocks of
// it; else the 32-element type llama-quantize demotes it to (Q2_K, Q3_K,
// Q2_0 and the ternary types: Q4_0, Q4_K: Q5_0, Q5_K: Q5_1, Q6_K: Q8_0, the 256-block IQ types:
// IQ4_NL), and F16 when even that does not fit.
GgmlType llama_block_fallback(GgmlType wanted, int64_t ncols);

// A mix's choice for one tensor: the type its rules want and the type the
// file holds after the fallback.
struct QuantChoice {
    GgmlType wanted = GgmlType::F32;
    GgmlType type = GgmlType::F32;
    bool fell_back() const { return wanted != type; }
};

}  // namespace ds4

// The tensor types of a Q2_K file: which type llama.cpp's llama-quantize
// gives each tensor of a model for LLAMA_FTYPE_MOSTLY_Q2_K (the mix the
// published GLM-5 Q2_K files start from).
//
// A port of llama_tensor_get_type / llama_tensor_get_type_impl and
// tensor_type_fallback in llama.cpp's src/llama-quant.cpp (v0.5.0, under
// .deps/oracle/llama.cpp) for that file type, without imatrix or
// --tensor-type overrides: Q2_K by default; the head Q6_K (Q8_0 when its
// rows are not whole 256-blocks); attention-v-like tensors (attn_v, attn_qkv,
// attn_kv_b) Q4_K when 4 or more query heads share a KV head, else Q3_K;
// ffn_down* and attn_output Q3_K; with exactly 8 experts attn_v and attn_k
// Q8_0 and attn_output Q5_K (llama.cpp's Mixtral rules); then the fallback
// for rows that are not whole blocks (llama_quant_rules.h). The 70B-only
// attn_v rule is out: no model ds4 synthesizes is a LLaMA 70B. The oracle
// test compares it with llama-quantize itself on the same file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "synth/llama_quant_rules.h"

namespace ds4 {

// The Q2_K choice for tensor `name` of shape `ne` (ggml order) stored as
// `source_type` before quantization. Tensors llama-quantize never quantizes
// keep `source_type` (wanted and type alike).
QuantChoice q2_k_tensor_type(const std::string& name, const std::vector<int64_t>& ne, GgmlType source_type,
                             const QuantMixModel& model);

// llama_ftype LLAMA_FTYPE_MOSTLY_Q2_K (general.file_type).
constexpr uint32_t kFileTypeQ2_K = 10;

}  // namespace ds4

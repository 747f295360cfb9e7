// The tensor types of a Q4_K_M file: which type llama.cpp's llama-quantize
// gives each tensor of a model for LLAMA_FTYPE_MOSTLY_Q4_K_M.
//
// A port of the decisions of llama_tensor_get_type / llama_tensor_get_type_impl
// and tensor_type_fallback in llama.cpp's src/llama-quant.cpp (v0.5.0, under
// .deps/oracle/llama.cpp), restricted to what a model of llama.cpp naming
// with separate q/k/v can meet. The oracle test compares it with
// llama-quantize itself on the same file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "synth/llama_quant_rules.h"

namespace ds4 {

// The Q4_K_M type of tensor `name` of shape `ne` (ggml order) stored as
// `source_type` before quantization. Tensors llama-quantize never quantizes
// (1-D, norms, the MoE router, names not ending in "weight") keep
// `source_type`.
GgmlType q4_k_m_tensor_type(const std::string& name, const std::vector<int64_t>& ne, GgmlType source_type,
                            const QuantMixModel& model);

// llama_ftype LLAMA_FTYPE_MOSTLY_Q4_K_M (general.file_type).
constexpr uint32_t kFileTypeQ4_K_M = 15;

}  // namespace ds4

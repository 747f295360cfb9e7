// Qwen3-MoE (GGUF arch "qwen3moe"): pre-norm decoder, GQA attention with
// per-head RMS q/k norms and NeoX RoPE, softmax top-k routed SwiGLU experts
// with renormalised weights (norm_topk_prob), no shared expert.
#pragma once

#include <memory>

#include "models/family.h"

namespace ds4 {

std::unique_ptr<Model> load_qwen3moe(const GgufFile& file, ModelMap& map, const LoadOptions& opts);

}  // namespace ds4

// GLM-5.x weights bound to the model map: the tensor names and shapes
// llama.cpp's glm-dsa loader reads. The optional `.scale` companions are
// bound where llama.cpp's graph applies them (attention output, FFN and
// expert projections) and ignored elsewhere, as llama.cpp does. The MTP
// (nextn) blocks after the trunk are checked but not bound: ds4 does not
// draft with them, so the model map never holds their bytes.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "experts/expert_source.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/glm_dsa/glm_dsa_hparams.h"

namespace ds4 {

// A matrix and its optional scale (one value, or one per expert).
struct GlmScaled {
    WeightRef w, scale;
};

// out = in x w, times the per-row scale where the file carries one.
inline void glm_project(Backend& be, const GlmScaled& p, const Tensor& in, Tensor& out) {
    be.matmul(p.w, in, out);
    if (p.scale) be.mul_row(out, p.scale);
}

struct GlmDsaLayerWeights {
    WeightRef attn_norm;
    WeightRef wq_a, q_a_norm, wq_b;  // q: E -> q_lora (RMS-normed) -> heads x (nope | rope)
    WeightRef wkv_a, kv_a_norm;      // E -> kv_lora latent | rope key (one head, shared)
    WeightRef wk_b;                  // [nope, kv_lora, heads]: absorbs a head's nope query into the latent space
    WeightRef wv_b;                  // [kv_lora, head_dim_v, heads]: a head's latent output to its value
    GlmScaled wo;
    // Lightning indexer (blocks with a full indexer only).
    WeightRef indexer_q_b, indexer_k, indexer_k_norm, indexer_k_norm_b, indexer_proj;

    WeightRef ffn_norm;
    GlmScaled gate, up, down;         // leading dense blocks
    WeightRef gate_inp, exp_probs_b;  // MoE blocks (exp_probs_b optional)
    RoutedExperts experts;
    GlmScaled gate_shexp, up_shexp, down_shexp;
};

struct GlmDsaWeights {
    WeightRef tok_embd, output_norm, output;
    std::vector<GlmDsaLayerWeights> layers;  // blocks [first, last)
};

// Binds the non-layer tensors (the head's only with has_head) and those of blocks [first, last) (layers[0]
// is block `first`), the routed experts to their bytes only with
// resident_experts; checks the shapes of the MTP blocks when the file has
// them. Throws ds4::Error naming the file and tensor.
GlmDsaWeights bind_glm_dsa_weights(const GgufFile& file, ModelMap& map, GlmDsaHparams& hp, int first, int last,
                                   bool has_head, bool resident_experts);

}  // namespace ds4

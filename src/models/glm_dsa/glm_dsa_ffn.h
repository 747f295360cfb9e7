// GLM-5 feed-forward: a dense SwiGLU FFN in the leading blocks; elsewhere
// routed SwiGLU experts chosen by sigmoid scores (expert-bias correction,
// group-limited where the file says so, routed scaling factor) plus the
// shared expert.
#pragma once

#include "backend/backend.h"
#include "experts/expert_source.h"
#include "models/glm_dsa/glm_dsa_hparams.h"
#include "models/glm_dsa/glm_dsa_weights.h"

namespace ds4 {

// The FFN output (before the residual add) of the normed rows x of block
// `layer`; routed experts come from `experts` (the model's weight source).
// `next`: the following block of this stage (null: none), whose router the
// source may ask for a lookahead guess at its experts.
Tensor glm_ffn(Backend& be, const GlmDsaHparams& hp, const GlmDsaLayerWeights& L, int layer, const Tensor& x,
               ExpertSource& experts, const GlmDsaLayerWeights* next = nullptr);

}  // namespace ds4

// DeepSeek V4 feed-forward: routed experts (hash-routed on the first
// hash_layer_count layers: token id -> expert table; scored elsewhere:
// sqrt-softplus with the exp_probs_b selection bias) plus the shared expert,
// both with clamped SwiGLU.
#pragma once

#include "backend/backend.h"
#include "models/deepseek4/dsv4_hparams.h"
#include "models/deepseek4/dsv4_weights.h"

namespace ds4 {

// The routed experts come from `experts` (the model's weight source);
// `tokens` are the batch's token ids (hash routing reads them on the device).
// `next`: the following block of this stage (null: none), whose router the
// source may ask for a lookahead guess at its experts.
Tensor dsv4_ffn(Backend& be, const Dsv4Hparams& hp, const Dsv4LayerWeights& L, int layer, const Tensor& x,
                const IntArray& tokens, ExpertSource& experts, const Dsv4LayerWeights* next = nullptr);

}  // namespace ds4

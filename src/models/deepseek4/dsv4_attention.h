// DeepSeek V4 attention: low-rank queries (head dim 512 on Flash), one
// shared key=value head, partial RoPE on the head's tail, a sliding window
// of raw keys plus compressed keys (ratio 4: indexer-selected; ratio 128:
// all completed blocks), attention sinks, de-rotation of the output and the
// grouped low-rank output projection.
#pragma once

#include "backend/backend.h"
#include "models/deepseek4/dsv4_hparams.h"
#include "models/deepseek4/dsv4_state.h"
#include "models/deepseek4/dsv4_weights.h"

namespace ds4 {

Tensor dsv4_attention(Backend& be, const Dsv4Hparams& hp, const Dsv4LayerWeights& L, Dsv4LayerState& st, int layer,
                      const Tensor& cur, int64_t pos0, const IntArray& positions);

}  // namespace ds4

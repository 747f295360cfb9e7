// DeepSeek V4 attention: low-rank queries (head dim 512 on Flash), one
// shared key=value head, partial RoPE on the head's tail, a sliding window
// of raw keys plus compressed keys (ratio 4: indexer-selected; ratio 128:
// all completed blocks), attention sinks, de-rotation of the output and the
// grouped low-rank output projection.
#pragma once

#include "backend/backend.h"
#include "models/deepseek4/dsv4_hparams.h"
#include "models/deepseek4/dsv4_ops.h"
#include "models/deepseek4/dsv4_state.h"
#include "models/deepseek4/dsv4_weights.h"

namespace ds4 {

// The index lists of one forward pass, made on the device from the batch's
// positions and slots once per step and shared by every layer: where each
// row sits, where its raw key goes in the window ring, and what each
// compressor ratio pools, keeps and shows.
struct Dsv4StepPlan {
    Dsv4Rows rows;
    IntArray window_dst;
    Dsv4CompressorPlan csa, hca;  // ratio 4 and ratio 128 (when the stage has such layers)
    const Dsv4CompressorPlan& for_ratio(int ratio) const { return ratio == kDsv4CsaRatio ? csa : hca; }
};

Dsv4StepPlan plan_dsv4_step(Backend& be, const Dsv4Hparams& hp, const Dsv4State& state, const Batch& batch);

// Attention over the rows of many sequences at once: every op runs once
// over all rows (the weights read once per step), each row reading its own
// sequence's window and compressed caches in `st` (this layer's state).
Tensor dsv4_attention(Backend& be, const Dsv4Hparams& hp, const Dsv4LayerWeights& L, const Dsv4StepPlan& plan,
                      Dsv4LayerState& st, int layer, const Tensor& cur);

}  // namespace ds4

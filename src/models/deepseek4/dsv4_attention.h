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

// Rows [row0, row0 + n) of a batch: one sequence's consecutive positions
// from pos0, whose caches are `state` (that slot's state of this layer).
struct Dsv4Segment {
    int64_t row0 = 0, n = 0, pos0 = 0;
    Dsv4LayerState* state = nullptr;
};

// Attention over the rows of many sequences: the projections, norms and
// rotations run once over all rows (the weights read once per step); the
// compressors, the indexer, the window/compressed attention and the window
// update run per segment, on that sequence's caches. `positions` holds
// every row's position in backend memory.
Tensor dsv4_attention(Backend& be, const Dsv4Hparams& hp, const Dsv4LayerWeights& L, const std::vector<Dsv4Segment>& segs,
                      int layer, const Tensor& cur, const IntArray& positions);

}  // namespace ds4

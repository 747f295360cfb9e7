// The KV compressor of DeepSeek V4's compressed attention: every `ratio`
// positions become one key row, a per-channel softmax-weighted pool of the
// block's projected rows (ratio 4 also pools the previous block, with the
// other half of the projection), RMS-normed and rotated at the block's first
// position.
#pragma once

#include "backend/backend.h"
#include "models/deepseek4/dsv4_ops.h"
#include "models/deepseek4/dsv4_state.h"
#include "models/deepseek4/dsv4_weights.h"

namespace ds4 {

// A compressor's state for n_slots sequences of up to n_ctx positions;
// adds its bytes to `bytes`.
Dsv4CompressorState make_compressor_state(Backend& be, int ratio, int64_t dim, int64_t n_ctx, int n_slots,
                                          uint64_t& bytes);

// Feeds the batch rows `cur` ([n x n_embd]) through the compressor: writes
// every block completed by a row into st.cache and keeps the rows later
// blocks need in the ring. `plan` is the batch's plan for st's ratio.
void compressor_update(Backend& be, const Dsv4CompressorWeights& w, Dsv4CompressorState& st,
                       const Dsv4CompressorPlan& plan, const Tensor& cur, int64_t dim, const RopeParams& rope,
                       float rms_eps);

}  // namespace ds4

// The lightning indexer of ratio-4 (CSA) layers: scores every visible
// compressed block for each query with relu(q_h . k) weighted per head, and
// keeps the top_k blocks for the attention.
#pragma once

#include "backend/backend.h"
#include "models/deepseek4/dsv4_hparams.h"
#include "models/deepseek4/dsv4_ops.h"
#include "models/deepseek4/dsv4_state.h"
#include "models/deepseek4/dsv4_weights.h"

namespace ds4 {

// qr: the normalised query low-rank rows; cur: the attention input rows.
// Updates the indexer's own compressed keys, then selects blocks (row ids
// of the attention's compressed cache, whose slots are laid out alike).
RowSets indexer_select(Backend& be, const Dsv4Hparams& hp, const Dsv4LayerWeights& L, Dsv4CompressorState& st,
                       const Dsv4CompressorPlan& plan, const Tensor& qr, const Tensor& cur,
                       const IntArray& positions);

}  // namespace ds4

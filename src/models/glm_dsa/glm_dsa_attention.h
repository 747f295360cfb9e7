// GLM-5 attention: multi-head latent attention (low-rank q, a shared
// compressed kv latent with a decoupled RoPE key, heads absorbed into the
// latent space) restricted to the positions DeepSeek sparse attention's
// lightning indexer picks for each query.
#pragma once

#include "backend/backend.h"
#include "models/deepseek4/dsv4_ops.h"
#include "models/glm_dsa/glm_dsa_hparams.h"
#include "models/glm_dsa/glm_dsa_state.h"
#include "models/glm_dsa/glm_dsa_weights.h"

namespace ds4 {

// The indexer of a full-indexer block: stores this step's indexer keys,
// then keeps for each row the indexer_top_k best of the positions it may
// see (`visible`, its causal set), all of them when there are no more.
// qr: the RMS-normed low-rank query rows; x: the attention input rows.
RowSets glm_indexer_select(Backend& be, const GlmDsaHparams& hp, const GlmDsaLayerWeights& L, GlmDsaLayerState& st,
                           const CacheRows& where, const RowSets& visible, const Tensor& qr, const Tensor& x);

// The attention output (before the residual add) of rows x over the cache
// rows `selected` lists; stores this step's latent rows first.
Tensor glm_attention(Backend& be, const GlmDsaHparams& hp, const GlmDsaLayerWeights& L, GlmDsaLayerState& st,
                     const CacheRows& where, const RowSets& selected, const Tensor& qr, const Tensor& x);

}  // namespace ds4

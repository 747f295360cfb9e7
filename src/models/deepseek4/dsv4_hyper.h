// Manifold-constrained hyper-connections: the residual is n_hc streams
// ([rows x n_hc * n_embd]). Before a block, the streams collapse into one
// input with per-token weights; after it, the block output and a
// Sinkhorn-normalised mix of the old streams form the new streams.
#pragma once

#include "backend/backend.h"
#include "models/deepseek4/dsv4_hparams.h"
#include "models/deepseek4/dsv4_weights.h"

namespace ds4 {

struct HcSite {
    Tensor post, comb;  // kept for hc_post
};

// Returns the block input [rows x n_embd]; fills site.post / site.comb.
Tensor hc_pre(Backend& be, const Dsv4Hparams& hp, const Dsv4HcWeights& w, const Tensor& streams, HcSite& site);
// streams_out = post * y + comb-mix of streams_in.
void hc_post(Backend& be, const Tensor& y, const Tensor& streams_in, const HcSite& site, Tensor& streams_out);
// The output head's collapse (pre weights only).
Tensor hc_head(Backend& be, const Dsv4Hparams& hp, const Dsv4HcWeights& w, const Tensor& streams);

}  // namespace ds4

// What GLM-5 keeps per sequence between steps: per trunk block the
// compressed latent KV cache (the RMS-normed kv_lora latent and the roped
// shared key, which is all multi-head latent attention needs: keys and
// values are rebuilt from them by the absorbed projections), and per
// full-indexer block the lightning indexer's keys. Slot s owns cache rows
// [s * ctx, (s + 1) * ctx); cache row = position.
#pragma once

#include <algorithm>
#include <vector>

#include "models/family.h"

namespace ds4 {

struct GlmDsaLayerState {
    Tensor latent;       // [slots * ctx x kv_lora_rank]
    Tensor pe;           // [slots * ctx x n_rot]
    Tensor indexer_keys; // [slots * ctx x indexer_head_dim]; empty in shared-indexer blocks
};

class GlmDsaState final : public ModelState {
public:
    std::vector<GlmDsaLayerState> layers;  // the stage's blocks
    int64_t ctx = 0;
    int slots = 1;
    uint64_t size = 0;
    int64_t n_ctx() const override { return ctx; }
    int n_slots() const override { return slots; }
    uint64_t bytes() const override { return size; }
    std::vector<Tensor> slot_tensors(int slot, int64_t n_past) override {
        const int64_t rows = std::clamp<int64_t>(n_past, 0, ctx);
        std::vector<Tensor> views;
        for (GlmDsaLayerState& l : layers) {
            views.push_back(l.latent.row_view(slot * ctx, rows));
            views.push_back(l.pe.row_view(slot * ctx, rows));
            if (l.indexer_keys.data) views.push_back(l.indexer_keys.row_view(slot * ctx, rows));
        }
        return views;
    }
};

}  // namespace ds4

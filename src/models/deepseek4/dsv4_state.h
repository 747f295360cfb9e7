// Per-sequence state of a DeepSeek V4 model: for every layer the sliding
// window of raw keys, and for compressed layers the compressed key cache,
// the compressor's ring of per-position kv/score rows still needed by
// blocks that have not completed, and (ratio 4) the lightning indexer's own
// compressed keys and compressor ring. All rings are addressed by position
// modulo their size, so any chunking of the prompt fills them identically.
// A state holds N sequence slots, each its own set.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "models/family.h"

namespace ds4 {

struct Dsv4CompressorState {
    int ratio = 0;
    bool overlap = false;   // ratio 4: blocks pool the previous block's rows too
    Tensor ring_kv, ring_score;  // [ring x coff*dim], row = position % ring
    Tensor cache;                // [n_ctx / ratio x dim], row = block index
    bool active() const { return ratio != 0; }
};

struct Dsv4LayerState {
    Tensor window;  // [n_swa x head_dim], row = position % n_swa
    Dsv4CompressorState attn, indexer;
};

// One sequence slot: a layer state per block of the stage.
struct Dsv4SlotState {
    std::vector<Dsv4LayerState> layers;
};

class Dsv4State final : public ModelState {
public:
    std::vector<Dsv4SlotState> slots;
    int64_t ctx = 0;
    uint64_t size = 0;
    int64_t n_ctx() const override { return ctx; }
    int n_slots() const override { return static_cast<int>(slots.size()); }
    uint64_t bytes() const override { return size; }
    // The window and compressor rings are addressed by position modulo their
    // size, so positions past `to` have overwritten state that positions
    // before it still need: only resuming exactly where the cache ends works.
    bool can_rewind(int64_t to, int64_t n_past) const override { return to == n_past; }
    std::vector<Tensor> slot_tensors(int slot) override {
        std::vector<Tensor> all;
        for (auto& l : slots[static_cast<size_t>(slot)].layers)
            for (Tensor* t : {&l.window, &l.attn.ring_kv, &l.attn.ring_score, &l.attn.cache, &l.indexer.ring_kv,
                              &l.indexer.ring_score, &l.indexer.cache})
                if (t->size() > 0) all.push_back(*t);
        return all;
    }
};

}  // namespace ds4

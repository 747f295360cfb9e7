// Per-sequence state of a DeepSeek V4 model: for every layer the sliding
// window of raw keys, and for compressed layers the compressed key cache,
// the compressor's ring of per-position kv/score rows still needed by
// blocks that have not completed, and (ratio 4) the lightning indexer's own
// compressed keys and compressor ring. All rings are addressed by position
// modulo their size, so any chunking of the prompt fills them identically.
// A state holds N sequence slots, each its own set.
#pragma once

#include <algorithm>
#include <vector>

#include "backend/backend.h"
#include "models/family.h"

namespace ds4 {

// Every tensor holds the rows of all sequence slots, slot s owning a
// contiguous block (rows_per_slot rows), so one op serves the rows of many
// sequences and a recorded decode step finds any slot's rows on the device.
struct Dsv4CompressorState {
    int ratio = 0;
    bool overlap = false;   // ratio 4: blocks pool the previous block's rows too
    int64_t ring = 0;       // ring rows per slot: the current block, and the previous one when overlapping
    int64_t cache_rows = 0; // compressed rows per slot: n_ctx / ratio
    Tensor ring_kv, ring_score;  // [slots * ring x coff*dim], row = slot * ring + position % ring
    Tensor cache;                // [slots * cache_rows x dim], row = slot * cache_rows + block index
    bool active() const { return ratio != 0; }
};

struct Dsv4LayerState {
    Tensor window;  // [slots * n_swa x head_dim], row = slot * n_swa + position % n_swa
    Dsv4CompressorState attn, indexer;
};

class Dsv4State final : public ModelState {
public:
    std::vector<Dsv4LayerState> layers;  // one per block of the stage
    int64_t ctx = 0, n_swa = 0;
    int slot_count = 0;
    uint64_t size = 0;
    int64_t n_ctx() const override { return ctx; }
    int n_slots() const override { return slot_count; }
    uint64_t bytes() const override { return size; }
    // The window and compressor rings are addressed by position modulo their
    // size, so positions past `to` have overwritten state that positions
    // before it still need: only resuming exactly where the cache ends works.
    bool can_rewind(int64_t to, int64_t n_past) const override { return to == n_past; }
    // Rings hold positions modulo their size (all their rows once n_past
    // reaches it); compressed caches one row per completed block.
    std::vector<Tensor> slot_tensors(int slot, int64_t n_past) override {
        std::vector<Tensor> all;
        auto part = [&](const Tensor& t, int64_t per_slot, int64_t used) {
            all.push_back(t.row_view(int64_t(slot) * per_slot, std::clamp<int64_t>(used, 0, per_slot)));
        };
        for (auto& l : layers) {
            part(l.window, n_swa, n_past);
            for (const Dsv4CompressorState* c : {&l.attn, &l.indexer}) {
                if (!c->active()) continue;
                part(c->ring_kv, c->ring, n_past);
                part(c->ring_score, c->ring, n_past);
                part(c->cache, c->cache_rows, n_past / c->ratio);
            }
        }
        return all;
    }
};

}  // namespace ds4

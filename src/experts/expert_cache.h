// An expert cache: a bounded set of slots, each holding one (layer, expert)'s
// gate, up and down matrices (and output scales), filled from the GGUF file
// when the router asks for an expert no slot holds. The model map then need
// not hold any routed expert (the bytes are read from the file, ExpertReader),
// which is what lets a model larger than memory run.
//
// This is the synchronous core: misses are read in the step that needs
// them, the least recently used slot not needed by the current block is
// evicted. Streaming (issue 11) grows it: a pinned host tier, io_uring
// reads, eviction by routing frequency, prefetch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "experts/expert_reader.h"
#include "experts/expert_source.h"

namespace ds4 {

class ModelMap;

struct ExpertCacheStats {
    uint64_t lookups = 0;     // (block, expert) requests, one per distinct expert per resolve
    uint64_t hits = 0;
    uint64_t misses = 0;      // each one a read of the expert's bytes from the file
    uint64_t bytes_read = 0;
};

class ExpertCache final : public ExpertSource {
public:
    // Slots for `slots` experts of `blocks` (0: one per expert of every
    // block, a complete second copy), attached to `backend` and read from
    // `map`'s file. Throws ds4::Error for a negative count or a slot table
    // larger than the address space.
    ExpertCache(Backend& backend, ModelMap& map, const std::vector<RoutedExperts>& blocks, int64_t slots);
    ~ExpertCache() override;
    ExpertCache(const ExpertCache&) = delete;
    ExpertCache& operator=(const ExpertCache&) = delete;

    // Bytes of one slot for these blocks (the largest block's gate, up and
    // down, each part aligned), to size a cache by bytes.
    static uint64_t slot_bytes_for(const std::vector<RoutedExperts>& blocks);

    std::string describe() const override;
    std::string stats_line() const override;
    bool needs_mapped_experts() const override { return false; }
    bool replayable() const override { return false; }  // reads the routing back to fill slots
    // Throws ds4::Error when the block needs more distinct experts at once
    // than the cache has slots.
    ExpertMatrices resolve(Backend& backend, const RoutedExperts& block, Routing& routing) override;

    int64_t slots() const { return n_slots_; }
    uint64_t slot_bytes() const { return slot_bytes_; }
    const ExpertCacheStats& stats() const { return stats_; }

private:
    // Where block b's matrices sit inside a slot, and its scales.
    struct BlockLayout {
        uint64_t up_offset = 0, down_offset = 0;
        size_t scales = 0;  // index of the block's first scale array in scales_
    };
    struct Slot {
        int layer = -1;
        int64_t expert = -1;
        uint64_t last_use = 0;
    };
    int64_t slot_for(const RoutedExperts& block, int64_t expert, Backend& backend);
    void load(int64_t slot, const RoutedExperts& block, int64_t expert, Backend& backend);

    ExpertReader reader_;             // the file, read with pread (errors, not SIGBUS)
    std::vector<uint8_t> staging_;    // one matrix on its way to a slot
    int64_t n_slots_ = 0;
    uint64_t slot_bytes_ = 0;
    std::unordered_map<int, BlockLayout> layout_;   // by layer
    std::vector<Slot> slot_;
    std::unordered_map<uint64_t, int64_t> where_;   // (layer << 32 | expert) -> slot
    uint8_t* bytes_ = nullptr;                       // n_slots_ * slot_bytes_ (+ one slot of slack)
    uint64_t bytes_size_ = 0;
    float* scales_ = nullptr;                        // per block, per matrix kind: n_slots_ floats
    uint64_t scales_size_ = 0;
    uint64_t tick_ = 0;
    ExpertCacheStats stats_;
};

}  // namespace ds4

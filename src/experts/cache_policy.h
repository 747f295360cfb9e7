// The expert cache's policy, apart from its memory and reads: which
// (layer, expert) each device slot and each host-tier slot holds, which
// expert a miss evicts, when a step goes to scratch or reads the block
// whole. ExpertCache runs it on every step of a model; a routing-trace
// replay (experts/trace_replay.h) runs the very same code without a model
// or a read, so the hit rates it reports are the cache's.
//
// Device slots: eviction by decayed routing frequency (a count that halves
// every `half_life_steps` steps, all blocks once each), least recently used
// among equals; a miss colder than every evictable expert goes to a scratch
// slot (one token's worth, never remembered); experts of the current step
// are never evicted. Host tier: least recently used first; every expert
// read from the file passes through it.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/ssd_streaming.h"
#include "experts/expert_source.h"
#include "experts/routing_profile.h"

namespace ds4 {

// One MoE block as the policy sees it.
struct PolicyBlock {
    int layer = -1;
    int64_t n_expert = 0;
};

struct CachePolicyOptions {
    int64_t slots = 0;              // remembered device slots; 0: one per expert of every block
    int64_t experts_per_token = 0;  // that many scratch slots
    // Host-tier slots asked for; the tier exists only when the device slots
    // do not hold every expert, and holds at most every expert.
    int64_t host_slots = 0;
    double half_life_steps = 32;
    PrefillStrategy prefill = PrefillStrategy::automatic;
};

// What one step of one block does.
struct SlotPlan {
    std::vector<int32_t> wanted;  // the distinct experts routed to, ascending
    bool whole = false;           // served by reading the block whole; the slots stay as they were
    std::vector<std::pair<int64_t, int64_t>> loads;  // (slot, expert) to fill: the misses
    std::unordered_map<int32_t, int32_t> slot_of;    // expert -> slot, every wanted one (empty when whole)
};

// Where a load's bytes come from on the way to its device slot.
enum class HostRoute : uint8_t {
    file,     // read from the file (no tier, or every tier slot is this step's)
    hit,      // the host tier holds it: a copy, no read
    claimed,  // read from the file into this host slot, then copied
};
struct HostPlan {
    std::vector<HostRoute> route;  // one per load
    std::vector<int64_t> slot;     // its host slot (hit or claimed), else -1
};

class CachePolicy {
public:
    // Throws ds4::Error for a negative slot count (one sentence).
    CachePolicy(const std::vector<PolicyBlock>& blocks, const CachePolicyOptions& options);

    // Plans a step of `layer` whose `rows` tokens chose `ids` (rows x
    // experts per token): warms their routing frequency, then either
    // decides to read the block whole or assigns every miss a slot,
    // evicting as it must. Throws ds4::Error for a block it was not built
    // for or an expert id out of range.
    SlotPlan plan(int layer, const std::vector<int32_t>& ids, int64_t rows);
    // The host tier's part of the plan's loads, in order (hits counted).
    HostPlan plan_host(int layer, const std::vector<std::pair<int64_t, int64_t>>& loads);
    // A failed read: the loads' slots and claimed host slots hold partial
    // bytes; forget them so a later step reads again.
    void forget(int layer, const std::vector<std::pair<int64_t, int64_t>>& loads, const HostPlan& host);
    // Claims a host slot for every expert at tick 0 (a tier that holds them
    // all is filled at start); `fill` gets each (layer, expert, host slot).
    void fill_host(const std::function<void(int, int64_t, int64_t)>& fill);
    // Puts these (layer, expert) pairs, in order, into free slots until none
    // is left (unknown pairs and ones held already are skipped): the loads
    // to make, by layer.
    std::unordered_map<int, std::vector<std::pair<int64_t, int64_t>>> preload(
        const std::vector<std::pair<int, int64_t>>& experts);

    // Whether a remembered slot holds this expert now (decides nothing).
    bool holds(int layer, int64_t expert) const;
    // Routing counts so far, undecayed, by (layer, expert).
    ExpertCounts routing_counts() const;
    int64_t slots() const { return n_slots_; }
    int64_t scratch_slots() const { return n_scratch_; }
    int64_t host_slots() const { return int64_t(host_.size()); }
    int64_t total_experts() const { return int64_t(heat_.size()); }
    // lookups, hits, misses, host_hits, evictions and scratch_loads; the
    // owner adds the reads.
    ExpertSourceStats& counts() { return counts_; }
    const ExpertSourceStats& counts() const { return counts_; }

private:
    struct Block {
        int64_t n_expert = 0;
        size_t first = 0;  // index of its expert 0 in heat_
    };
    struct Slot {
        int layer = -1;
        int64_t expert = -1;
        uint64_t last_use = 0;
        size_t heat = 0;  // its index in heat_
    };
    // Decayed routing frequency of one (layer, expert).
    struct Heat {
        double score = 0;
        uint64_t at = 0;  // tick of the last update
        uint64_t count = 0;
    };
    // A remembered slot this step may refill: free, or holding an expert
    // the step does not use (with its decayed routing frequency).
    struct Refill {
        int64_t slot = 0;
        bool occupied = false;
        double heat = 0;
    };
    struct HostSlot {
        int layer = -1;
        int64_t expert = -1;
        uint64_t last_use = 0;
    };

    double heat_now(const Heat& h) const;
    void warm(size_t index);
    // The `wanted` coldest of them: free ones first, then by decayed
    // routing frequency, least recently used among equals.
    std::vector<Refill> refill_order(size_t wanted) const;
    int64_t host_find(int layer, int64_t expert);
    int64_t host_claim(int layer, int64_t expert);

    CachePolicyOptions options_;
    std::unordered_map<int, Block> block_;  // by layer
    std::vector<PolicyBlock> order_;        // as given
    int64_t n_slots_ = 0, n_scratch_ = 0;
    std::vector<Slot> slot_;
    std::unordered_map<uint64_t, int64_t> where_;  // (layer << 32 | expert) -> slot
    std::vector<Heat> heat_;
    double half_life_ticks_ = 1;
    uint64_t tick_ = 0;
    std::vector<HostSlot> host_;
    std::unordered_map<uint64_t, int64_t> host_where_;
    ExpertSourceStats counts_;
};

}  // namespace ds4

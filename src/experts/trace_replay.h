// Replays a routing trace through the expert cache's own policy
// (experts/cache_policy.h) at a given budget, with no model and no read:
// the hits, misses and evictions a run with that routing would count.
// A hit rate is a count, so a replay here tells what the cache does on any
// machine; what a miss costs in time is the disk's and PCIe's business.
#pragma once

#include <cstdint>
#include <string>

#include "common/ssd_streaming.h"
#include "experts/expert_source.h"
#include "experts/routing_trace.h"

namespace ds4 {

struct ReplayOptions {
    int64_t device_slots = 1;  // remembered device slots (as --ssd-streaming-cache-experts N); 0: every expert
    int64_t host_slots = 0;    // the CUDA host tier's (as --ssd-streaming-host-cache N); 0: none
    PrefillStrategy prefill = PrefillStrategy::automatic;
    double half_life_steps = 32;
};

struct ReplayResult {
    ExpertSourceStats counts;    // lookups, hits, misses, host_hits, evictions, scratch_loads
    uint64_t whole_steps = 0;    // steps served by reading the block whole (not counted as lookups)
    uint64_t routes = 0;
    uint64_t tokens = 0;
    int64_t total_experts = 0;
    int64_t device_slots = 0, scratch_slots = 0, host_slots = 0;  // as the policy sized them

    double device_hit_rate() const;  // hits / lookups
    double host_hit_rate() const;    // host hits / lookups: misses the host tier served
    double hit_rate() const;         // (hits + host hits) / lookups
    double misses_per_token() const;
    double disk_reads_per_token() const;  // misses the host tier did not serve
};

ReplayResult replay_trace(const RoutingTrace& trace, const ReplayOptions& options);

}  // namespace ds4

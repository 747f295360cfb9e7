// Generated routing traces, for measuring the expert cache on a known
// popularity when no model routes that way (synthetic models route close
// to uniformly): per block, expert popularity follows Zipf(s) over a random
// permutation of the ids (so the popular experts differ from block to
// block), and each token picks `experts_per_token` distinct experts, drawn
// one after another in proportion to popularity among those not yet picked
// (top-k as sampling without replacement). s = 0 is the uniform case.
#pragma once

#include <cstdint>

#include "experts/routing_trace.h"

namespace ds4 {

struct TraceShape {
    int64_t blocks = 0;             // MoE blocks, layers 0 .. blocks-1
    int64_t experts = 0;            // routed experts per block
    int64_t experts_per_token = 0;  // <= experts
};

// `tokens` decode steps (one route per block, one row each). Throws
// ds4::Error for a shape outside the trace format's bounds or a negative s.
RoutingTrace zipf_routing_trace(const TraceShape& shape, uint64_t tokens, double s, uint64_t seed);

}  // namespace ds4

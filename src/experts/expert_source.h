// Weight sources for routed experts: where a family's MoE op finds the
// matrices of the experts its router chose this step. Routed experts are
// most of a large MoE model's bytes; the source decides whether they sit in
// the model map (resident, today's default) or come from the file through
// a cache of slots (the seam --ssd-streaming builds on). Families call
// resolve() between routing and the MoE op and never learn which it is.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace ds4 {

// One MoE block's routed experts as the family binds them: 3-D weights
// [cols x rows x n_expert] (gate, up, down) and optional per-expert F32
// output scales (llama.cpp's ".scale", n_expert values or one for all).
// Without resident experts the WeightRefs carry shape, type, name and file
// offset but no data.
struct RoutedExperts {
    int layer = -1;  // the block, in the whole model's numbering
    WeightRef gate, up, down;
    WeightRef gate_scale, up_scale, down_scale;  // empty when the file has none
    int64_t n_expert() const { return gate.ne[2]; }
};

// What the MoE op reads: three 3-D weights whose matrix index is what
// routing.experts holds after resolve(), and their scales (null if none).
struct ExpertMatrices {
    WeightRef gate, up, down;
    WeightRef gate_scale, up_scale, down_scale;
    const WeightRef* scale_of(const WeightRef& s) const { return s.data ? &s : nullptr; }
};

// What a source did so far (all zero for resident experts).
struct ExpertSourceStats {
    uint64_t lookups = 0;           // (block, expert) requests, one per distinct expert per step
    uint64_t hits = 0;
    uint64_t misses = 0;            // not in the device (or, on the CPU, RAM) slots
    uint64_t host_hits = 0;         // misses copied from the host tier instead of read from the file
    uint64_t evictions = 0;         // misses that replaced a remembered expert
    uint64_t scratch_loads = 0;     // misses served from a scratch slot, remembering nothing
    uint64_t full_layer_reads = 0;  // steps that read a block's whole routed tensors
    uint64_t miss_reads = 0;        // read requests for misses: one per expert from a pack, three from the GGUF
    uint64_t bytes_read = 0;
    double read_seconds = 0;        // wall time reads were in flight (the disk's busy time)
    double stall_seconds = 0;       // wall time steps waited on reads (less, where reads overlap compute)
    uint64_t background_loads = 0;  // steps whose misses were read while the step computed its hits
    uint64_t lookahead_reads = 0;   // experts read ahead on the router lookahead's guess
    uint64_t lookahead_hits = 0;    // misses served from those instead of the file
    uint64_t promotions = 0;        // experts moved into device memory between steps (expert windows)
};

class ExpertSource {
public:
    virtual ~ExpertSource() = default;
    // One line for the startup log.
    virtual std::string describe() const = 0;
    // One line of what it did so far (hits, misses, bytes read), for the end
    // of a run; "" when there is nothing to say.
    virtual std::string stats_line() const { return {}; }
    virtual ExpertSourceStats stats() const { return {}; }
    // Whether the model map must hold the routed experts' bytes.
    virtual bool needs_mapped_experts() const = 0;
    // Whether resolve() reads nothing back from the backend and issues the
    // same work whatever the routing, so a decode step that calls it can be
    // recorded once and replayed.
    virtual bool replayable() const = 0;
    // The matrices for the experts `routing` chose in `block`. A source that
    // keeps experts elsewhere than at their expert index (a cache's slots)
    // rewrites routing.experts, in backend memory, to index its matrices.
    virtual ExpertMatrices resolve(Backend& backend, const RoutedExperts& block, Routing& routing) = 0;

    // Called by the engine between steps, once every op of the last step
    // has finished and before the next is issued (replayed or not): a
    // source may read what the steps left in backend memory and change
    // what backs its experts.
    virtual void between_steps(Backend& /*backend*/) {}

    // Router lookahead. Whether a guess at the next block's experts is
    // worth computing for a step of `rows` tokens (a source that reads in
    // the background, for decode-sized steps).
    virtual bool wants_lookahead(int64_t /*rows*/) const { return false; }
    // The experts block `next` will likely choose (its router applied to
    // this block's FFN input), once this block's MoE op is done: the source
    // may read those it lacks while the next block's attention computes.
    // Changes no result, and nothing of what a cache keeps: the next
    // resolve() still decides from the real routing.
    virtual void prefetch(Backend& /*backend*/, const RoutedExperts& /*next*/, const Routing& /*guess*/) {}
};

// The bound tensors themselves, read where the model map holds them (the
// CPU reads the mapping; CUDA its resident or host-registered copy).
class ResidentExperts final : public ExpertSource {
public:
    std::string describe() const override { return "experts: resident in the model map"; }
    bool needs_mapped_experts() const override { return true; }
    bool replayable() const override { return true; }
    ExpertMatrices resolve(Backend& backend, const RoutedExperts& block, Routing& routing) override;
};

}  // namespace ds4

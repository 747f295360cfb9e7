// The route: which worker runs which blocks after the coordinator's slice.
// Workers register (and re-register every second as a heartbeat); a worker
// silent for longer than kStaleAfter drops out, so its blocks show up as
// missing until it (or a replacement) registers again. The route is only
// ever used whole: every block after the coordinator's exactly once, and
// the output head exactly once: on the last worker (which returns logits)
// or on the coordinator (the last worker returns its final hidden state).
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "common/layer_range.h"
#include "pipeline.pb.h"

namespace ds4 {

namespace wire = ds4::pipeline::v1;

// "blocks 4..7 + head" (or "the head" for an empty block range).
std::string describe_slice(const wire::Slice& s);
wire::Slice make_slice(const LayerRange& layers, int n_layer);

class RouteTable {
public:
    using Clock = std::chrono::steady_clock;
    static constexpr std::chrono::milliseconds kStaleAfter{5000};

    // The coordinator runs blocks [0, first_block) of n_layer, and the
    // output head when head_on_coordinator.
    RouteTable(int n_layer, int first_block, bool head_on_coordinator = false);

    // A registration or heartbeat: "" when accepted, else why not (one
    // sentence). The same worker (worker_id) refreshes its entry; a new
    // process with the same slice replaces a stale or restarted one; a
    // slice overlapping another live worker's is refused, and so is a last
    // slice that doubles the head or leaves nobody to apply it.
    std::string add(const wire::Registration& r, Clock::time_point now = Clock::now());
    // The hops covering blocks [first_block, n_layer) and the head, in
    // order. Throws ds4::Error naming the missing or doubled blocks.
    std::vector<wire::Hop> hops(Clock::time_point now = Clock::now()) const;
    // "" when hops() would succeed, else its sentence.
    std::string problem(Clock::time_point now = Clock::now()) const;

private:
    struct Entry {
        wire::Registration reg;
        Clock::time_point seen;
    };
    std::vector<wire::Hop> hops_locked(Clock::time_point now, std::string* problem) const;
    // Why a worker's slice would leave the head doubled or missing ("" when not).
    std::string head_problem(const wire::Slice& s) const;
    int n_layer_, first_block_;
    bool head_on_coordinator_;
    mutable std::mutex mu_;
    std::vector<Entry> entries_;
};

}  // namespace ds4

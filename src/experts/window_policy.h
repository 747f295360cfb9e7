// Which expert windows device memory backs (experts/expert_windows.h),
// apart from the memory: between steps it takes the step's routing counts
// per window, keeps a score that halves every `half_life_steps` steps, and
// says which windows to demote and which to promote into which slot. The
// hottest windows take free slots first; once the slots are full a window
// replaces the coldest promoted one only when its score is clearly higher
// (a uniform router then leaves the slots alone instead of trading experts
// of equal worth over the host link every step). A window the step used is
// never demoted in that step's moves (it stays as hot as any).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace ds4 {

struct WindowPolicyOptions {
    int64_t windows = 0;
    int64_t slots = 0;
    double half_life_steps = 32;
    // Promotions a step: into free slots (a warm-up), and replacing a
    // promoted window (each costs a window's bytes over the host link).
    // One swap a step over a clear margin: on an H100 (Qwen3-30B-A3B q4_k_m,
    // half the experts on the device) 4:1.5:1 decoded 69.8 t/s at depth
    // 48, 1:2:4 76.2 and no swaps 77.1 (a swap is two ~0.2 ms remaps):
    // this keeps nearly all of the speed and still follows a routing that
    // drifts (bench/RESULTS.md, 2026-12-07 fifth session).
    int64_t fill_per_step = 64;
    int64_t swaps_per_step = 1;
    // A replacement needs score > coldest * ratio + margin.
    double swap_ratio = 2.0;
    double swap_margin = 4.0;
};

struct WindowMoves {
    std::vector<int64_t> demote;
    std::vector<std::pair<int64_t, int64_t>> promote;  // (window, slot)
    bool empty() const { return demote.empty() && promote.empty(); }
};

class WindowPolicy {
public:
    // Throws ds4::Error for negative sizes or more slots than windows.
    explicit WindowPolicy(const WindowPolicyOptions& o);

    // One step's counts, counts[w] = the (row, slot) pairs routed to window
    // w. Returns the moves, already applied to slot_of().
    WindowMoves step(const int32_t* counts);
    // Promotes these windows, in order, into free slots (a warm start from
    // a routing profile); returns the moves.
    WindowMoves preload(const std::vector<int64_t>& hottest_first);

    int64_t slot_of(int64_t w) const { return slot_[size_t(w)]; }  // -1: host memory
    int64_t promoted() const { return int64_t(window_of_.size()) - int64_t(free_.size()); }
    double score(int64_t w) const { return score_[size_t(w)]; }

private:
    void promote(int64_t w, int64_t s, WindowMoves& m);
    WindowPolicyOptions o_;
    double decay_ = 1;
    std::vector<double> score_;
    std::vector<int64_t> slot_;       // by window
    std::vector<int64_t> window_of_;  // by slot, -1: free
    std::vector<int64_t> free_;       // free slots, taken from the back
};

}  // namespace ds4

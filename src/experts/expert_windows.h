// Routed experts in windows (backend.h ExpertWindows): every (layer, expert)
// of the process's blocks has a fixed window of the address space the MoE
// kernels read, filled from the file once at start. The backend backs a
// window with host memory (on CUDA page-locked RAM the GPU reads over the
// host link) or with a device slot. Nothing in a step depends on which: the
// MoE op reads the experts at their own indices (no slot rewrite, no routing
// read back), so a decode step is recorded and replayed like the resident
// one, and a step's hits and misses are read by the same kernels in the same
// launches, the misses straight from RAM instead of copied first.
//
// The source still learns: the backend counts each block's routing into an
// array of its memory as part of the step (count_experts, recorded with it),
// and between steps WindowPolicy turns those counts into promotions of hot
// experts into free or colder slots and demotions (the copies and remaps
// run then, off the step). The logits are the resident run's whatever the
// windows' backing: the bytes are the same.
//
// For models whose routed experts fit in RAM but not on the device (the case
// llama.cpp serves with `-ot exps=CPU`). A model larger than RAM needs the
// expert cache (experts/expert_cache.h), which reads misses from the disk.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "experts/expert_source.h"
#include "experts/routing_profile.h"
#include "experts/window_policy.h"

namespace ds4 {

class ModelMap;

struct ExpertWindowOptions {
    int64_t device_slots = 0;  // windows device memory may back
    // How promotions are chosen (its window and slot counts are the
    // source's own).
    WindowPolicyOptions policy;
};

class ExpertWindowSource final : public ExpertSource {
public:
    // Windows for every expert of `blocks` from `backend` (which must offer
    // them), filled from `map`'s file. Throws ds4::Error (one sentence) when
    // the backend has no windows, the memory cannot be had, or a read fails.
    ExpertWindowSource(Backend& backend, ModelMap& map, const std::vector<RoutedExperts>& blocks,
                       const ExpertWindowOptions& options);
    ~ExpertWindowSource() override;

    // Bytes of one window's contents for these blocks (before the
    // backend's rounding to its mapping granularity).
    static uint64_t window_bytes_for(const std::vector<RoutedExperts>& blocks);

    std::string describe() const override;
    std::string stats_line() const override;
    ExpertSourceStats stats() const override;
    bool needs_mapped_experts() const override { return false; }
    bool replayable() const override { return true; }
    ExpertMatrices resolve(Backend& backend, const RoutedExperts& block, Routing& routing) override;
    void between_steps(Backend& backend) override;

    // Promotes these (layer, expert) pairs, hottest first, into the free
    // slots (a routing profile's warm start).
    void preload(Backend& backend, const std::vector<std::pair<int, int64_t>>& experts);
    // Routing counts so far, by (layer, expert), undecayed: what a profile
    // records for the next run's warm start.
    ExpertCounts routing_counts() const;
    int64_t device_slots() const { return windows_->device_slots(); }
    int64_t windows() const { return windows_->size() - 1; }  // less the slack window
    int64_t promoted() const { return policy_->promoted(); }
    // Whether window of (layer, expert) is backed by device memory now.
    bool on_device(int layer, int64_t expert) const;

private:
    struct Block {
        const RoutedExperts* experts = nullptr;
        int64_t first = 0;  // its first window
        WeightRef scales[3];  // the file's gate/up/down scales in backend memory (empty if none)
    };
    const Block* block_of(int layer) const;
    void fill(Backend& backend, ModelMap& map);
    void apply(Backend& backend, const WindowMoves& moves);

    std::vector<RoutedExperts> blocks_;
    std::vector<Block> index_;
    uint64_t up_offset_ = 0, down_offset_ = 0, content_bytes_ = 0;
    std::unique_ptr<ExpertWindows> windows_;
    std::unique_ptr<WindowPolicy> policy_;
    IntArray counts_;              // per window, in backend memory, since the last between_steps
    std::vector<int32_t> host_counts_, zeros_;
    std::vector<uint64_t> totals_;  // per window, every step's counts added
    std::vector<float> scale_values_;  // every block's scales, attached to the backend
    // A step has been issued: from then on every between_steps reads the
    // counts, since a replayed step counts without calling resolve().
    bool counting_ = false;
    double fill_seconds_ = 0;
    uint64_t fill_bytes_ = 0;
    mutable std::mutex stats_mu_;
    ExpertSourceStats stats_;
};

}  // namespace ds4

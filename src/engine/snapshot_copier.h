// Prompt snapshots for the prefix cache, downloaded off the scheduler's
// thread. A snapshot of a ~2.5k-token Qwen3-30B prompt is ~490 MB of float
// KV rows; downloading it into fresh host memory held every running stream
// ~0.18 s (an H100 server run spent 12.9 of its 36 s there, 2026-12-06).
// The scheduler stages the slot's state in backend memory instead (a device
// copy, ~1 ms) and goes on; a worker thread downloads it
// (Backend::download_aside) and the scheduler stores the finished snapshots
// in the cache at its next step.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "engine/session.h"
#include "engine/slot_pool.h"

namespace ds4 {

class SnapshotCopier {
public:
    // At most `max_pending_bytes` of staged snapshots wait or download at
    // once (backend memory).
    SnapshotCopier(Backend& backend, uint64_t max_pending_bytes);
    ~SnapshotCopier();  // finishes the downloads under way; what take() has not returned is dropped
    SnapshotCopier(const SnapshotCopier&) = delete;
    SnapshotCopier& operator=(const SnapshotCopier&) = delete;

    // Whether a snapshot of `bytes` fits beside those pending.
    bool has_room(uint64_t bytes) const;
    // Queues a staged snapshot (has_room first).
    void push(StagedSnapshot staged);
    // The snapshots downloaded so far, oldest first; their staging is freed
    // here, on the caller's thread (the one that issues the backend's work).
    // With `wait`, first waits until none is pending.
    std::vector<SessionSnapshot> take(bool wait);
    // Whether a pending snapshot's tokens are a prefix of `prompt` longer
    // than `at_least` (a request admitted now would resume from it).
    bool pending_prefix_of(std::span<const int32_t> prompt, int64_t at_least) const;

private:
    struct Job {
        StagedSnapshot staged;
        SessionSnapshot done;
        bool finished = false;
        bool failed = false;
    };
    void work();

    Backend& backend_;
    const uint64_t max_pending_bytes_;
    mutable std::mutex mu_;
    std::condition_variable wake_, finished_;
    std::deque<Job> jobs_;  // in push order; the worker takes the first unfinished one
    uint64_t pending_bytes_ = 0;
    bool stop_ = false;
    std::thread worker_;
};

}  // namespace ds4

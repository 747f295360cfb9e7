#include "engine/snapshot_copier.h"

#include <algorithm>

#include "common/log.h"

namespace ds4 {

SnapshotCopier::SnapshotCopier(Backend& backend, uint64_t max_pending_bytes)
    : backend_(backend), max_pending_bytes_(max_pending_bytes), worker_([this] { work(); }) {}

SnapshotCopier::~SnapshotCopier() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    wake_.notify_all();
    worker_.join();
}

bool SnapshotCopier::has_room(uint64_t bytes) const {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_bytes_ + bytes <= max_pending_bytes_;
}

void SnapshotCopier::push(StagedSnapshot staged) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        pending_bytes_ += staged.bytes();
        jobs_.push_back(Job{std::move(staged), {}, false, false});
    }
    wake_.notify_one();
}

void SnapshotCopier::work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        auto job = std::find_if(jobs_.begin(), jobs_.end(), [](const Job& j) { return !j.finished; });
        if (job == jobs_.end()) {
            if (stop_) return;
            wake_.wait(lock);
            continue;
        }
        // Jobs are only appended or taken from the front once finished, so
        // this one stays where it is while the lock is released.
        Job* j = &*job;
        lock.unlock();
        SlotSnapshot s;
        bool failed = false;
        try {
            s.n_past = j->staged.n_past;
            for (const Tensor& t : j->staged.tensors) {
                s.tensors.emplace_back(static_cast<size_t>(t.size()));
                backend_.download_aside(t, s.tensors.back().data());
            }
        } catch (const std::exception& e) {
            // The cache misses this prompt; the request itself is unaffected.
            log_warning(std::string("ds4: a prompt snapshot could not be copied for the prefix cache: ") + e.what());
            failed = true;
        }
        lock.lock();
        s.tokens = j->staged.tokens;
        j->done = SessionSnapshot{std::move(s), j->staged.tokens};
        j->failed = failed;
        j->finished = true;
        finished_.notify_all();
    }
}

std::vector<SessionSnapshot> SnapshotCopier::take(bool wait) {
    std::vector<Job> out;
    {
        std::unique_lock<std::mutex> lock(mu_);
        if (wait)
            finished_.wait(lock, [&] {
                return std::all_of(jobs_.begin(), jobs_.end(), [](const Job& j) { return j.finished; });
            });
        while (!jobs_.empty() && jobs_.front().finished) {
            pending_bytes_ -= jobs_.front().staged.bytes();
            out.push_back(std::move(jobs_.front()));
            jobs_.pop_front();
        }
    }
    std::vector<SessionSnapshot> done;
    for (Job& j : out)
        if (!j.failed) done.push_back(std::move(j.done));
    return done;  // `out` frees the staging here, on this thread
}

bool SnapshotCopier::pending_prefix_of(std::span<const int32_t> prompt, int64_t at_least) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Job& j : jobs_) {
        const auto& t = j.staged.tokens;
        const auto n = static_cast<int64_t>(t.size());
        if (n > at_least && n < static_cast<int64_t>(prompt.size()) && std::equal(t.begin(), t.end(), prompt.begin()))
            return true;
    }
    return false;
}

}  // namespace ds4

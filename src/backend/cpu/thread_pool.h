// A fixed pool of worker threads for data-parallel loops. The calling thread
// takes part in the work, so a pool of n threads spawns n - 1 workers.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ds4 {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Runs fn(begin, end) over [0, n) split into contiguous chunks of at
    // least `grain` items; returns when all chunks are done.
    void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

private:
    void worker_loop(int index);

    int n_threads_;
    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable work_cv_;
    std::condition_variable done_cv_;
    const std::function<void(int64_t, int64_t)>* job_ = nullptr;
    int64_t job_n_ = 0;
    int64_t chunk_ = 0;
    int64_t next_ = 0;
    int active_ = 0;
    uint64_t generation_ = 0;
    bool stop_ = false;
};

}  // namespace ds4

#include "backend/cpu/thread_pool.h"

#include <algorithm>

namespace ds4 {

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    if (n <= 0) return;
    grain = std::max<int64_t>(1, grain);
    // Chunks: about 4 per thread for balance, never below the grain.
    int64_t chunk = std::max<int64_t>(grain, (n + 4 * n_threads_ - 1) / (4 * n_threads_));
    if (n_threads_ == 1 || n <= chunk) {
        fn(0, n);
        return;
    }
    {
        std::lock_guard<std::mutex> lk(mu_);
        job_ = &fn;
        job_n_ = n;
        chunk_ = chunk;
        next_ = 0;
        active_ = n_threads_;
        ++generation_;
    }
    work_cv_.notify_all();
    // The caller works too.
    for (;;) {
        int64_t b;
        {
            std::lock_guard<std::mutex> lk(mu_);
            b = next_;
            next_ += chunk_;
        }
        if (b >= n) break;
        fn(b, std::min(n, b + chunk));
    }
    std::unique_lock<std::mutex> lk(mu_);
    --active_;
    done_cv_.wait(lk, [&] { return active_ == 0; });
    job_ = nullptr;
}

void ThreadPool::worker_loop(int) {
    uint64_t seen = 0;
    for (;;) {
        const std::function<void(int64_t, int64_t)>* job;
        int64_t n, chunk;
        {
            std::unique_lock<std::mutex> lk(mu_);
            work_cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            job = job_;
            n = job_n_;
            chunk = chunk_;
        }
        for (;;) {
            int64_t b;
            {
                std::lock_guard<std::mutex> lk(mu_);
                b = next_;
                next_ += chunk;
            }
            if (b >= n) break;
            (*job)(b, std::min(n, b + chunk));
        }
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (--active_ == 0) done_cv_.notify_all();
        }
    }
}

}  // namespace ds4

#include "experts/read_worker.h"

#include <stdexcept>
#include <utility>

namespace ds4 {

ReadWorker::ReadWorker() : thread_([this] { run(); }) {}

ReadWorker::~ReadWorker() {
    {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !started_ || done_; });
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void ReadWorker::start(std::function<void()> job) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (started_) throw std::logic_error("ReadWorker::start while a job is in flight");
        job_ = std::move(job);
        started_ = true;
        done_ = false;
        error_ = nullptr;
    }
    cv_.notify_all();
}

bool ReadWorker::busy() const {
    std::lock_guard<std::mutex> lock(mu_);
    return started_;
}

void ReadWorker::wait() {
    std::exception_ptr error;
    {
        std::unique_lock<std::mutex> lock(mu_);
        if (!started_) return;
        cv_.wait(lock, [&] { return done_; });
        started_ = false;
        error = std::exchange(error_, nullptr);
    }
    if (error) std::rethrow_exception(error);
}

void ReadWorker::run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        cv_.wait(lock, [&] { return stop_ || job_; });
        if (stop_) return;
        std::function<void()> job = std::exchange(job_, nullptr);
        lock.unlock();
        std::exception_ptr error;
        try {
            job();
        } catch (...) {
            error = std::current_exception();
        }
        lock.lock();
        error_ = error;
        done_ = true;
        cv_.notify_all();
    }
}

}  // namespace ds4

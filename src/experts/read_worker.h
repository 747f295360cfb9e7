// A thread that runs one job at a time for the expert cache: the reads of
// a step's misses, so the step computes its other experts (and its shared
// expert) while the disk works. One job is in flight at most; the caller
// waits for it before it starts the next or touches what the job writes.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace ds4 {

class ReadWorker {
public:
    ReadWorker();
    // Waits for a job still running (its error is dropped), then stops.
    ~ReadWorker();
    ReadWorker(const ReadWorker&) = delete;
    ReadWorker& operator=(const ReadWorker&) = delete;

    // Runs `job` on the worker's thread. Throws std::logic_error while an
    // earlier job has not been waited for.
    void start(std::function<void()> job);
    // Whether a job was started and not yet waited for.
    bool busy() const;
    // Returns when the job has finished; rethrows what it threw. Nothing to
    // do when no job was started.
    void wait();

private:
    void run();

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::function<void()> job_;   // the job to run, empty once taken
    bool started_ = false;        // a job was started and not yet waited for
    bool done_ = false;           // ... and it has finished
    bool stop_ = false;
    std::exception_ptr error_;
    std::thread thread_;          // last: started once the members above exist
};

}  // namespace ds4

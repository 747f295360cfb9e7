// Where a replayed decode step's time goes, when DS4_CUDA_STEP_TIMING is set:
// a pair of events around each replayed step (the device's time for the
// whole graph) and the host's clock between one replay's launch and the next
// (the step's period as the caller sees it), summarised when the backend
// goes. The op profile (DS4_CUDA_PROFILE) runs ops one by one and cannot say
// whether a replayed step's device time or the host between steps is what
// a decode rate is made of.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <vector>

namespace ds4::cuda {

class StepTiming {
public:
    StepTiming();
    ~StepTiming();
    StepTiming(const StepTiming&) = delete;
    StepTiming& operator=(const StepTiming&) = delete;

    bool enabled() const { return enabled_; }
    // Around one replay's launch on `stream`.
    void begin(cudaStream_t stream);
    void end(cudaStream_t stream);
    // Waits for the device and prints the summary to `out`.
    void report(std::FILE* out);

private:
    struct Step {
        cudaEvent_t start = nullptr, stop = nullptr;
        double host_period_ms = -1;  // launch to the next launch; -1 for the last
    };
    bool enabled_ = false;
    std::vector<Step> steps_;
    std::chrono::steady_clock::time_point last_launch_{};
    bool open_ = false;  // begin() started a step that end() has not closed
};

}  // namespace ds4::cuda

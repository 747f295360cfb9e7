#include "backend/cuda/step_timing.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace ds4::cuda {

namespace {
constexpr size_t kMaxSteps = 1 << 16;

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
}
}  // namespace

StepTiming::StepTiming() {
    const char* v = std::getenv("DS4_CUDA_STEP_TIMING");
    enabled_ = v && *v && std::string(v) != "0";
}

StepTiming::~StepTiming() {
    for (auto& s : steps_) {
        if (s.start) cudaEventDestroy(s.start);
        if (s.stop) cudaEventDestroy(s.stop);
    }
}

void StepTiming::begin(cudaStream_t stream) {
    if (!enabled_ || steps_.size() >= kMaxSteps) return;
    const auto now = std::chrono::steady_clock::now();
    if (!steps_.empty())
        steps_.back().host_period_ms = std::chrono::duration<double, std::milli>(now - last_launch_).count();
    last_launch_ = now;
    Step s;
    if (cudaEventCreate(&s.start) != cudaSuccess || cudaEventCreate(&s.stop) != cudaSuccess) {
        cudaGetLastError();
        if (s.start) cudaEventDestroy(s.start);
        return;
    }
    cudaEventRecord(s.start, stream);
    steps_.push_back(s);
    open_ = true;
}

void StepTiming::end(cudaStream_t stream) {
    // Only the step begin() started: one it skipped (full, or no events)
    // must not move the previous step's stop.
    if (!open_) return;
    cudaEventRecord(steps_.back().stop, stream);
    open_ = false;
}

void StepTiming::report(std::FILE* out) {
    if (!enabled_ || steps_.empty()) return;
    cudaDeviceSynchronize();
    std::vector<double> device, period;
    for (const auto& s : steps_) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, s.start, s.stop) != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        device.push_back(ms);
        if (s.host_period_ms >= 0) period.push_back(s.host_period_ms);
    }
    std::fprintf(out,
                 "cuda step timing: %zu replays; device time per replay median %.3f ms; host period between "
                 "launches median %.3f ms (%zu periods; includes steps of other shapes and any pause of the "
                 "caller)\n",
                 device.size(), median(device), median(period), period.size());
}

}  // namespace ds4::cuda

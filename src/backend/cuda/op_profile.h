// Per-op GPU time, when DS4_CUDA_PROFILE is set in the environment: a pair
// of events around each backend op on its stream, summed by op name and
// printed (time, share, calls, GB/s of weights read) when the backend goes.
// The profiler does not see inside a recorded step, so the CUDA backend
// records nothing while it is on (ops then run one by one).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace ds4::cuda {

class OpProfile {
public:
    OpProfile();
    ~OpProfile();
    OpProfile(const OpProfile&) = delete;
    OpProfile& operator=(const OpProfile&) = delete;

    bool enabled() const { return enabled_; }

    class Scope {
    public:
        Scope(OpProfile* p, size_t index, cudaStream_t s) : p_(p), index_(index), stream_(s) {}
        ~Scope();
        Scope(Scope&& o) noexcept : p_(o.p_), index_(o.index_), stream_(o.stream_) { o.p_ = nullptr; }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;
        Scope& operator=(Scope&&) = delete;

    private:
        OpProfile* p_;
        size_t index_;
        cudaStream_t stream_;
    };
    // Times what is issued on `stream` until the scope ends; `bytes`: weight
    // bytes the op reads (0 when not a weight product).
    Scope op(const std::string& name, uint64_t bytes, cudaStream_t stream);
    // Waits for the device and prints the table to `out`.
    void report(std::FILE* out);

private:
    struct Entry {
        std::string name;
        uint64_t bytes = 0;
        cudaEvent_t start = nullptr, stop = nullptr;
    };
    bool enabled_ = false;
    std::vector<Entry> entries_;
};

}  // namespace ds4::cuda

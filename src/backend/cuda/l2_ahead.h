// Weights asked into L2 ahead of the op that reads them (Backend::prefetch,
// DS4_CUDA_L2_AHEAD). A replayed decode step is a chain of small dependent
// kernels, each bound by the latency of its first weight loads while HBM
// sits mostly idle (the products run at 0.6-1 TB/s of 3.35-4.8:
// bench/NOTES.md). Weights do not depend on the step's activations, so
// another branch of the step can have them on their way to L2 one or two
// kernels early: the product that reads them then waits on L2, not on HBM.
// The branch issues prefetch instructions only; results do not change.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ds4::cuda {

class L2Ahead {
public:
    static constexpr int kMaxRanges = 8;
    struct Range {
        const uint8_t* p = nullptr;  // device memory
        uint64_t bytes = 0;
    };

    L2Ahead() = default;
    L2Ahead(const L2Ahead&) = delete;
    L2Ahead& operator=(const L2Ahead&) = delete;
    ~L2Ahead();

    // Whether DS4_CUDA_L2_AHEAD asks for it (read once): 0 off; 1 the
    // model's hints and the chosen experts' down matrices; 2 also their gate
    // and up matrices, alongside the kernel that reads them (more bytes in
    // flight than its own loads keep).
    static int level();
    static bool enabled() { return level() > 0; }

    // Up to kMaxRanges ranges, once what `main` holds so far has finished.
    void ranges(cudaStream_t main, const Range* r, int n);
    // Matrix ids[i] (i < n_ids) of base + id * matrix_bytes, the same way:
    // the chosen experts of a step, whose ids are on the device.
    void matrices(cudaStream_t main, const uint8_t* base, uint64_t matrix_bytes, const int32_t* ids, int n_ids);
    // Rejoins `main` (a recording must end with every branch joined). Returns
    // the error rather than throwing: it is called while a recording ends,
    // which must leave capture mode whatever happens.
    cudaError_t join(cudaStream_t main);

private:
    void fork(cudaStream_t main);

    cudaStream_t side_ = nullptr;
    cudaEvent_t fork_ = nullptr, done_ = nullptr;
    bool open_ = false;  // work on side_ that main has not joined
};

}  // namespace ds4::cuda

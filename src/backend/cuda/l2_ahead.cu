#include "backend/cuda/l2_ahead.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/env_switch.h"

namespace ds4::cuda {
namespace {

// A few blocks are enough: a prefetch does not wait for its line, so a
// thread issues its share and leaves; the SMs stay with the main branch.
constexpr int kAheadBlocks = 32;
constexpr int kAheadThreads = 256;
constexpr int kBlocksPerMatrix = 8;

struct RangeList {
    const uint8_t* p[L2Ahead::kMaxRanges];
    uint64_t bytes[L2Ahead::kMaxRanges];
    int n;
};

__global__ void __launch_bounds__(kAheadThreads) l2_ranges_kernel(RangeList r) {
    const uint64_t t = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x, step = uint64_t(gridDim.x) * blockDim.x;
    for (int i = 0; i < r.n; ++i) prefetch_l2(r.p[i], r.bytes[i], t, step);
}

// Block (x, i): part x of kBlocksPerMatrix of matrix ids[i].
__global__ void __launch_bounds__(kAheadThreads)
    l2_matrices_kernel(const uint8_t* base, uint64_t matrix_bytes, const int32_t* ids) {
    const uint8_t* m = base + uint64_t(ids[blockIdx.y]) * matrix_bytes;
    const uint64_t part = (matrix_bytes + kBlocksPerMatrix - 1) / kBlocksPerMatrix;
    const uint64_t lo = part * blockIdx.x, hi = lo + part < matrix_bytes ? lo + part : matrix_bytes;
    if (lo < hi) prefetch_l2(m + lo, hi - lo, threadIdx.x, blockDim.x);
}

}  // namespace

int L2Ahead::level() {
    static const int on = int(std::clamp<long long>(env_int("DS4_CUDA_L2_AHEAD", 0), 0, 2));
    return on;
}

L2Ahead::~L2Ahead() {
    if (side_) {
        cudaStreamSynchronize(side_);
        cudaStreamDestroy(side_);
    }
    if (fork_) cudaEventDestroy(fork_);
    if (done_) cudaEventDestroy(done_);
}

void L2Ahead::fork(cudaStream_t main) {
    if (!side_) {
        check(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking), "creating the L2 prefetch stream");
        check(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming), "creating the L2 prefetch stream");
        check(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "creating the L2 prefetch stream");
    }
    check(cudaEventRecord(fork_, main), "forking the L2 prefetch branch");
    check(cudaStreamWaitEvent(side_, fork_, 0), "forking the L2 prefetch branch");
    open_ = true;
}

void L2Ahead::ranges(cudaStream_t main, const Range* r, int n) {
    RangeList list{};
    for (int i = 0; i < n && list.n < kMaxRanges; ++i)
        if (r[i].p && r[i].bytes) {
            list.p[list.n] = r[i].p;
            list.bytes[list.n++] = r[i].bytes;
        }
    if (list.n == 0) return;
    fork(main);
    l2_ranges_kernel<<<kAheadBlocks, kAheadThreads, 0, side_>>>(list);
    check(cudaGetLastError(), "launching the L2 prefetch");
}

void L2Ahead::matrices(cudaStream_t main, const uint8_t* base, uint64_t matrix_bytes, const int32_t* ids, int n_ids) {
    if (n_ids <= 0 || matrix_bytes == 0) return;
    fork(main);
    l2_matrices_kernel<<<dim3(kBlocksPerMatrix, unsigned(n_ids)), kAheadThreads, 0, side_>>>(base, matrix_bytes, ids);
    check(cudaGetLastError(), "launching the L2 prefetch");
}

cudaError_t L2Ahead::join(cudaStream_t main) {
    if (!open_) return cudaSuccess;
    open_ = false;
    cudaError_t e = cudaEventRecord(done_, side_);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(main, done_, 0);
    return e;
}

}  // namespace ds4::cuda

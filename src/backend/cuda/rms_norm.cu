// RMS norm (whole rows or per-head groups), with the CPU backend's
// arithmetic: the sum of squares in double, the inverse norm in float.
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"

namespace ds4::cuda {
namespace {

constexpr int kNormThreads = 256;
// Decode norms are one or a few long rows (DeepSeek V4's hyper-connection
// state is 4 x 4096 values): one 256-thread block per row left a single SM
// walking 64 dependent iterations per thread, ~11 us a call on the H200
// (2026-12-01 profile, ~67 calls per token). Few long rows get 1024 threads.
constexpr int kNormMaxThreads = 1024;

// 1 / sqrt(mean square + eps) of a row from each thread's share ss of its
// sum of squares (double): warps first, then the warps in order, so the sum
// depends only on the block's shape. Ends with a barrier: every thread's
// reads of the row happened before it returns.
__device__ __forceinline__ float block_inv_rms(double ss, int64_t group, float eps) {
    __shared__ double partial[kNormMaxThreads / 32];
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
    __syncthreads();
    double total = 0.0;
    for (int i = 0; i < int(blockDim.x >> 5); ++i) total += partial[i];
    return 1.0f / sqrtf(float(total / double(group)) + eps);
}

__global__ void rms_norm_kernel(const float* x, const float* w, float eps, int64_t group, float* y) {
    wait_for_inputs();
    const float* src = x + int64_t(blockIdx.x) * group;
    float* dst = y + int64_t(blockIdx.x) * group;
    double ss = 0.0;
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < group; i += blockDim.x) ss += double(src[i]) * src[i];
    const float inv = block_inv_rms(ss, group, eps);
    // x and y may be the same tensor: every read above happened before the barrier.
    for (int64_t i = threadIdx.x; i < group; i += blockDim.x) dst[i] = src[i] * inv * (w ? w[i] : 1.0f);
}


// x += d, then the rms_norm_kernel of the sum over whole rows: the same sums
// in the same order, so the result is bit for bit add then rms_norm.
__global__ void add_rms_norm_kernel(float* x, const float* d, const float* w, float eps, int64_t group, float* y) {
    wait_for_inputs();
    float* src = x + int64_t(blockIdx.x) * group;
    const float* dr = d + int64_t(blockIdx.x) * group;
    float* dst = y + int64_t(blockIdx.x) * group;
    double ss = 0.0;
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < group; i += blockDim.x) {
        const float v = src[i] + dr[i];
        src[i] = v;
        ss += double(v) * v;
    }
    const float inv = block_inv_rms(ss, group, eps);
    // Each thread reads back only the sums it wrote itself.
    for (int64_t i = threadIdx.x; i < group; i += blockDim.x) dst[i] = src[i] * inv * (w ? w[i] : 1.0f);
}

// The thread count depends on the shape only, so a recorded step replays the same sums.
int norm_threads(int64_t n_groups, int64_t group) { return n_groups < 64 && group >= 4096 ? kNormMaxThreads : kNormThreads; }
}  // namespace

void rms_norm(const float* x, const float* weight, float eps, int64_t n_groups, int64_t group, float* y,
              cudaStream_t stream) {
    if (n_groups <= 0) return;
    launch(rms_norm_kernel, unsigned(n_groups), norm_threads(n_groups, group), 0, stream, x, weight, eps, group, y);
    check_launch("rms_norm_kernel");
}

void add_rms_norm(float* x, const float* d, const float* weight, float eps, int64_t n_rows, int64_t cols, float* y,
                  cudaStream_t stream) {
    if (n_rows <= 0) return;
    launch(add_rms_norm_kernel, unsigned(n_rows), norm_threads(n_rows, cols), 0, stream, x, d, weight, eps, cols, y);
    check_launch("add_rms_norm_kernel");
}

}  // namespace ds4::cuda

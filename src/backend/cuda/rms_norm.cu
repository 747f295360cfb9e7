// RMS norm (whole rows or per-head groups), with the CPU backend's
// arithmetic: the sum of squares in double, the inverse norm in float.
#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"

namespace ds4::cuda {
namespace {

// Decode norms are one or a few rows, each one block: its time is the
// round trips its threads wait for, so a row gets about four values a
// thread (group / 4 threads, 32 to 1024), loaded four at a time before
// anything is stored. 256 threads a row with a load and a store an element
// took 7.3 us a Qwen3 add + norm of 2,048 values (ncu, H200, 2026-12-04).
constexpr int kNormMaxThreads = 1024;
constexpr int kNormBatch = 4;

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

// dst = src * inv * w over a row, kNormBatch values a thread loaded before
// any is stored (src and dst may be the same row).
__device__ __forceinline__ void scale_row(const float* src, const float* w, float inv, int64_t group, float* dst) {
    for (int64_t i0 = threadIdx.x; i0 < group; i0 += int64_t(kNormBatch) * blockDim.x) {
        float v[kNormBatch], m[kNormBatch];
#pragma unroll
        for (int u = 0; u < kNormBatch; ++u) {
            const int64_t i = i0 + int64_t(u) * blockDim.x;
            v[u] = i < group ? src[i] : 0.0f;
            m[u] = i < group && w ? w[i] : 1.0f;
        }
#pragma unroll
        for (int u = 0; u < kNormBatch; ++u) {
            const int64_t i = i0 + int64_t(u) * blockDim.x;
            if (i < group) dst[i] = v[u] * inv * m[u];
        }
    }
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
    scale_row(src, w, inv, group, dst);
}

// x += d, then the rms_norm_kernel of the sum over whole rows: the same sums
// in the same order, so the result is bit for bit add then rms_norm.
__global__ void add_rms_norm_kernel(float* x, const float* d, const float* w, float eps, int64_t group, float* y) {
    wait_for_inputs();
    float* src = x + int64_t(blockIdx.x) * group;
    const float* dr = d + int64_t(blockIdx.x) * group;
    float* dst = y + int64_t(blockIdx.x) * group;
    double ss = 0.0;
    for (int64_t i0 = threadIdx.x; i0 < group; i0 += int64_t(kNormBatch) * blockDim.x) {
        float v[kNormBatch];
#pragma unroll
        for (int u = 0; u < kNormBatch; ++u) {
            const int64_t i = i0 + int64_t(u) * blockDim.x;
            v[u] = i < group ? src[i] + dr[i] : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < kNormBatch; ++u) {
            const int64_t i = i0 + int64_t(u) * blockDim.x;
            if (i < group) {
                src[i] = v[u];
                ss += double(v[u]) * v[u];
            }
        }
    }
    const float inv = block_inv_rms(ss, group, eps);
    // Each thread reads back only the sums it wrote itself.
    scale_row(src, w, inv, group, dst);
}

// The thread count depends on the row length only, so a row's sums are the
// same alone and in a batch, and a recorded step replays them.
int norm_threads(int64_t group) {
    const int64_t t = (group + kNormBatch - 1) / kNormBatch;
    return int(std::min<int64_t>(kNormMaxThreads, std::max<int64_t>(32, (t + 31) / 32 * 32)));
}
}  // namespace

void rms_norm(const float* x, const float* weight, float eps, int64_t n_groups, int64_t group, float* y,
              cudaStream_t stream) {
    if (n_groups <= 0) return;
    launch(rms_norm_kernel, unsigned(n_groups), norm_threads(group), 0, stream, x, weight, eps, group, y);
    check_launch("rms_norm_kernel");
}

void add_rms_norm(float* x, const float* d, const float* weight, float eps, int64_t n_rows, int64_t cols, float* y,
                  cudaStream_t stream) {
    if (n_rows <= 0) return;
    launch(add_rms_norm_kernel, unsigned(n_rows), norm_threads(cols), 0, stream, x, d, weight, eps, cols, y);
    check_launch("add_rms_norm_kernel");
}

}  // namespace ds4::cuda

// The GLM-5 indexer keys' layer norm on the GPU: ggml_norm (mean and
// variance accumulated in double, the rest in float, as the CPU backend)
// and the optional affine part. One block per row.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops_glm_dsa.h"

namespace ds4::cuda {
namespace {

constexpr int kThreads = 256;

__device__ double block_sum(double v, double* part) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    double total = 0.0;
    for (int w = 0; w < int(blockDim.x >> 5); ++w) total += part[w];
    __syncthreads();  // part is reused by the next call
    return total;
}

__global__ void layer_norm_kernel(const float* x, int64_t n, const float* weight, const float* bias, float eps,
                                  float* y) {
    wait_for_inputs();
    __shared__ double part[kThreads / 32];
    const float* src = x + int64_t(blockIdx.x) * n;
    float* dst = y + int64_t(blockIdx.x) * n;
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += src[i];
    const float mean = float(block_sum(s, part) / double(n));
    double ss = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float d = src[i] - mean;
        ss += double(d) * d;
    }
    const float inv = 1.0f / sqrtf(float(block_sum(ss, part) / double(n)) + eps);
    // In place is allowed: each value is read before its own write only.
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        // Unfused, as the CPU rounds each step.
        float v = __fmul_rn(__fsub_rn(src[i], mean), inv);
        if (weight) v = __fmul_rn(v, weight[i]);
        if (bias) v = __fadd_rn(v, bias[i]);
        dst[i] = v;
    }
}

}  // namespace

void glm_layer_norm(const float* x, int64_t rows, int64_t n, const float* weight, const float* bias, float eps,
                    float* y, cudaStream_t stream) {
    if (rows <= 0 || n <= 0) return;
    // rows is grid x (up to 2^31 - 1).
    launch(layer_norm_kernel, unsigned(rows), kThreads, 0, stream, x, n, weight, bias, eps, y);
    check_launch("layer_norm_kernel");
}

}  // namespace ds4::cuda

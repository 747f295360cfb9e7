// Element-wise ops over activations, and the row gather / weighted
// scatter-add that route tokens to and from MoE experts.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"

namespace ds4::cuda {
namespace {

constexpr int kThreads = 256;

// Grid-stride loops: any n with a bounded grid.
#define DS4_FOR_EACH(i, n) \
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
    wait_for_inputs();
    DS4_FOR_EACH(i, n) out[i] = a[i] + b[i];
}
__global__ void scale_kernel(float* x, float s, int64_t n) {
    wait_for_inputs();
    DS4_FOR_EACH(i, n) x[i] *= s;
}
__global__ void mul_row_kernel(float* x, int64_t cols, const float* w, int64_t n_w, int64_t n) {
    wait_for_inputs();
    DS4_FOR_EACH(i, n) x[i] *= w[n_w == 1 ? 0 : i % cols];
}
__global__ void add_row_kernel(float* x, int64_t cols, const float* b, int64_t n) {
    wait_for_inputs();
    DS4_FOR_EACH(i, n) x[i] += b[i % cols];
}
__global__ void swiglu_kernel(const float* g, const float* u, float* out, int64_t n) {
    wait_for_inputs();
    DS4_FOR_EACH(i, n) {
        const float gv = g[i];
        out[i] = gv / (1.0f + expf(-gv)) * u[i];
    }
}
__global__ void gather_rows_kernel(const float* src, int64_t cols, const int32_t* rows, float* dst, int64_t n) {
    wait_for_inputs();
    DS4_FOR_EACH(i, n) dst[i] = src[int64_t(rows[i / cols]) * cols + i % cols];
}
__global__ void scatter_rows_kernel(const float* src, int64_t cols, const int32_t* rows, float* dst, int64_t n) {
    wait_for_inputs();
    DS4_FOR_EACH(i, n) dst[int64_t(rows[i / cols]) * cols + i % cols] = src[i];
}
__global__ void scatter_add_rows_kernel(const float* src, int64_t cols, const int32_t* rows, const float* w, float s,
                                        float* dst, int64_t n) {
    wait_for_inputs();
    DS4_FOR_EACH(i, n) {
        const int64_t r = i / cols;
        dst[int64_t(rows[r]) * cols + i % cols] += (w[r] * s) * src[i];
    }
}

unsigned grid_for(int64_t n) { return std::min<unsigned>(blocks_for(n, kThreads), 65535u * 8u); }

}  // namespace

void add(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    launch(add_kernel, grid_for(n), kThreads, 0, stream, a, b, out, n);
    check_launch("add_kernel");
}
void scale(float* x, float s, int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    launch(scale_kernel, grid_for(n), kThreads, 0, stream, x, s, n);
    check_launch("scale_kernel");
}
void mul_row(float* x, int64_t rows, int64_t cols, const float* w, int64_t n_w, cudaStream_t stream) {
    const int64_t n = rows * cols;
    if (n <= 0) return;
    launch(mul_row_kernel, grid_for(n), kThreads, 0, stream, x, cols, w, n_w, n);
    check_launch("mul_row_kernel");
}
void add_row(float* x, int64_t rows, int64_t cols, const float* b, cudaStream_t stream) {
    const int64_t n = rows * cols;
    if (n <= 0) return;
    launch(add_row_kernel, grid_for(n), kThreads, 0, stream, x, cols, b, n);
    check_launch("add_row_kernel");
}
void swiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    launch(swiglu_kernel, grid_for(n), kThreads, 0, stream, gate, up, out, n);
    check_launch("swiglu_kernel");
}
void gather_rows(const float* src, int64_t cols, const int32_t* rows, int64_t n, float* dst, cudaStream_t stream) {
    if (n <= 0 || cols <= 0) return;
    launch(gather_rows_kernel, grid_for(n * cols), kThreads, 0, stream, src, cols, rows, dst, n * cols);
    check_launch("gather_rows_kernel");
}
void scatter_rows(const float* src, int64_t cols, const int32_t* rows, int64_t n, float* dst, cudaStream_t stream) {
    if (n <= 0 || cols <= 0) return;
    launch(scatter_rows_kernel, grid_for(n * cols), kThreads, 0, stream, src, cols, rows, dst, n * cols);
    check_launch("scatter_rows_kernel");
}
void scatter_add_rows(const float* src, int64_t cols, const int32_t* rows, const float* weights, float s, int64_t n,
                      float* dst, cudaStream_t stream) {
    if (n <= 0 || cols <= 0) return;
    launch(scatter_add_rows_kernel, grid_for(n * cols), kThreads, 0, stream, src, cols, rows, weights, s, dst, n * cols);
    check_launch("scatter_add_rows_kernel");
}

}  // namespace ds4::cuda

// GLM-5's row plumbing on the GPU: latent-cache stores at each row's slot
// and position, the causal row sets of a batch, and per-head column slices
// (a query's nope and rope parts, the latent and the rope key of a kv row).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops_glm_dsa.h"

namespace ds4::cuda {
namespace {

constexpr int kThreads = 256;

// Block (column tile, row).
__global__ void cache_store_kernel(const float* rows, int64_t ld_rows, const int32_t* positions, const int32_t* slots,
                                   int64_t slot_rows, int64_t cols, float* cache, int64_t n_cache) {
    wait_for_inputs();
    const int64_t t = blockIdx.y;
    const int64_t pos = positions[t], slot = slots[t];
    if (pos < 0 || pos >= slot_rows || slot < 0 || (slot + 1) * slot_rows > n_cache) return;
    const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c < cols) cache[(slot * slot_rows + pos) * cols + c] = rows[t * ld_rows + c];
}

__global__ void plan_causal_kernel(const int32_t* positions, const int32_t* slots, int64_t slot_rows, int64_t n,
                                   int32_t* count, int32_t* base) {
    wait_for_inputs();
    const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= n) return;
    count[t] = positions[t] + 1;
    base[t] = int32_t(int64_t(slots[t]) * slot_rows);
}

// One thread per output value; block y = row.
__global__ void head_columns_kernel(const float* src, int64_t ld_src, int head_dim, int offset, int width,
                                    int64_t n_out, float* dst, int64_t ld_dst) {
    wait_for_inputs();
    const int64_t t = blockIdx.y;
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n_out) return;
    const int64_t h = i / width, c = i % width;
    dst[t * ld_dst + i] = src[t * ld_src + h * head_dim + offset + c];
}

constexpr int64_t kMaxY = 65535;  // rows go on grid y

}  // namespace

void glm_cache_store(const float* rows, int64_t ld_rows, const int32_t* positions, const int32_t* slots,
                     int64_t slot_rows, int64_t n, int64_t cols, float* cache, int64_t n_cache, cudaStream_t stream) {
    for (int64_t r0 = 0; r0 < n; r0 += kMaxY) {
        const int64_t nr = n - r0 < kMaxY ? n - r0 : kMaxY;
        const dim3 grid(blocks_for(cols, kThreads), unsigned(nr));
        launch(cache_store_kernel, grid, kThreads, 0, stream, rows + r0 * ld_rows, ld_rows, positions + r0, slots + r0,
                                                          slot_rows, cols, cache, n_cache);
        check_launch("cache_store_kernel");
    }
}

void glm_plan_causal(const int32_t* positions, const int32_t* slots, int64_t slot_rows, int64_t n, int32_t* count,
                     int32_t* base, cudaStream_t stream) {
    if (n <= 0) return;
    launch(plan_causal_kernel, blocks_for(n, kThreads), kThreads, 0, stream, positions, slots, slot_rows, n, count, base);
    check_launch("plan_causal_kernel");
}

void glm_head_columns(const float* src, int64_t ld_src, int64_t rows, int n_heads, int head_dim, int offset,
                      int width, float* dst, int64_t ld_dst, cudaStream_t stream) {
    const int64_t n_out = int64_t(n_heads) * width;
    if (n_out <= 0) return;
    for (int64_t r0 = 0; r0 < rows; r0 += kMaxY) {
        const int64_t nr = rows - r0 < kMaxY ? rows - r0 : kMaxY;
        const dim3 grid(blocks_for(n_out, kThreads), unsigned(nr));
        launch(head_columns_kernel, grid, kThreads, 0, stream, src + r0 * ld_src, ld_src, head_dim, offset, width, n_out,
                                                           dst + r0 * ld_dst, ld_dst);
        check_launch("head_columns_kernel");
    }
}

}  // namespace ds4::cuda

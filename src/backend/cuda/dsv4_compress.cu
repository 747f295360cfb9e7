// The KV compressor's pooling (a per-channel softmax over a block's source
// rows) and the row copies that keep DeepSeek V4's rings and caches.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops_deepseek4.h"

namespace ds4::cuda {
namespace {

constexpr int kPoolThreads = 128;

// Thread per (block, channel): the sources of a block are at most a few
// hundred rows (ratio 128), read column-wise, so neighbouring threads read
// neighbouring floats of the same source row. The max, the float exps and
// the double sums follow the CPU backend.
__global__ void compress_pool_kernel(PoolSources s, const int32_t* sources, int per_block, bool overlap, int64_t D,
                                     float* out) {
    wait_for_inputs();
    const int64_t blk = blockIdx.y;
    const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (d >= D) return;
    const int32_t* src = sources + blk * per_block;
    auto score_of = [&](int j, int32_t id) -> const float* {
        const int64_t col = overlap && j >= per_block / 2 ? D : 0;
        return id < s.n_chunk ? s.score + id * s.ld_score + col
                              : s.state_score + (id - s.n_chunk) * s.ld_state_score + col;
    };
    auto kv_of = [&](int j, int32_t id) -> const float* {
        const int64_t col = overlap && j >= per_block / 2 ? D : 0;
        return id < s.n_chunk ? s.kv + id * s.ld_kv + col : s.state_kv + (id - s.n_chunk) * s.ld_state_kv + col;
    };
    float mx = -INFINITY;
    bool any = false;
    for (int j = 0; j < per_block; ++j) {
        const int32_t id = src[j];
        if (id >= 0) mx = fmaxf(mx, score_of(j, id)[d]);
        any = any || id >= 0;
    }
    if (!any) {  // no block ends at this row
        out[blk * D + d] = 0.0f;
        return;
    }
    double sum = 0.0, acc = 0.0;
    for (int j = 0; j < per_block; ++j) {
        const int32_t id = src[j];
        if (id < 0) continue;
        const float w = expf(__fsub_rn(score_of(j, id)[d], mx));
        sum += w;
        acc += double(w) * kv_of(j, id)[d];
    }
    out[blk * D + d] = float(acc / sum);
}

__global__ void scatter_rows_kernel(const float* src, int64_t ld_src, const int32_t* dst_rows, int64_t n, float* dst,
                                    int64_t ld_dst, int64_t cols) {
    wait_for_inputs();
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n * cols; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = i / cols, c = i % cols;
        const int32_t d = dst_rows[r];
        if (d >= 0) dst[int64_t(d) * ld_dst + c] = src[r * ld_src + c];
    }
}

}  // namespace

void compress_pool(const PoolSources& s, const int32_t* sources, int per_block, bool overlap, int64_t n_blocks,
                   int64_t D, float* out, cudaStream_t stream) {
    if (n_blocks <= 0 || D <= 0) return;
    // Blocks go on grid y (<= 65535 per launch); a prefill chunk of 2048
    // positions makes at most 512 blocks, but a longer one is split.
    constexpr int64_t kMaxY = 65535;
    for (int64_t b0 = 0; b0 < n_blocks; b0 += kMaxY) {
        const int64_t nb = std::min(kMaxY, n_blocks - b0);
        const dim3 grid(blocks_for(D, kPoolThreads), unsigned(nb));
        launch(compress_pool_kernel, grid, kPoolThreads, 0, stream, s, sources + b0 * per_block, per_block, overlap, D,
                                                                out + b0 * D);
        check_launch("compress_pool_kernel");
    }
}

void scatter_rows(const float* src, int64_t ld_src, const int32_t* dst_rows, int64_t n, float* dst, int64_t ld_dst,
                  int64_t cols, cudaStream_t stream) {
    if (n <= 0 || cols <= 0) return;
    const unsigned grid = std::min<unsigned>(blocks_for(n * cols, 256), 65535u);
    launch(scatter_rows_kernel, grid, 256, 0, stream, src, ld_src, dst_rows, n, dst, ld_dst, cols);
    check_launch("scatter_rows_kernel");
}

}  // namespace ds4::cuda

// The KV compressor's pooling (a per-channel softmax over a block's source
// rows) and the row copies that keep DeepSeek V4's rings and caches.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cuda/cuda_check.h"
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
    const int64_t blk = blockIdx.y;
    const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (d >= D) return;
    const int32_t* src = sources + blk * per_block;
    auto score_of = [&](int j, int32_t id) -> const float* {
        const int64_t col = overlap && j >= per_block / 2 ? D : 0;
        return id < s.n_state ? s.state_score + id * s.ld_state_score + col
                              : s.score + (id - s.n_state) * s.ld_score + col;
    };
    auto kv_of = [&](int j, int32_t id) -> const float* {
        const int64_t col = overlap && j >= per_block / 2 ? D : 0;
        return id < s.n_state ? s.state_kv + id * s.ld_state_kv + col : s.kv + (id - s.n_state) * s.ld_kv + col;
    };
    float mx = -INFINITY;
    for (int j = 0; j < per_block; ++j) {
        const int32_t id = src[j];
        if (id >= 0) mx = fmaxf(mx, score_of(j, id)[d]);
    }
    double sum = 0.0, acc = 0.0;
    for (int j = 0; j < per_block; ++j) {
        const int32_t id = src[j];
        if (id < 0) continue;
        const float w = expf(__fsub_rn(score_of(j, id)[d], mx));
        sum += w;
        acc += double(w) * kv_of(j, id)[d];
    }
    // A block with no source at all is 0/0 = NaN, as on the CPU; the model
    // never makes one (every block has its own ratio rows).
    out[blk * D + d] = float(acc / sum);
}

// Row pairs passed by value: a decode step copies one to a few rows, and a
// kernel parameter costs no upload and no host synchronisation.
constexpr int kPairsPerLaunch = 256;
struct RowPairs {
    int32_t src[kPairsPerLaunch];
    int32_t dst[kPairsPerLaunch];
};

__global__ void copy_rows_kernel(const float* src, int64_t ld_src, float* dst, int64_t ld_dst, RowPairs pairs,
                                 int n, int64_t cols) {
    const int64_t total = int64_t(n) * cols;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = i / cols, c = i % cols;
        dst[int64_t(pairs.dst[r]) * ld_dst + c] = src[int64_t(pairs.src[r]) * ld_src + c];
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
        compress_pool_kernel<<<grid, kPoolThreads, 0, stream>>>(s, sources + b0 * per_block, per_block, overlap, D,
                                                                out + b0 * D);
        check_launch("compress_pool_kernel");
    }
}

void copy_rows(const float* src, int64_t ld_src, const int32_t* host_src_rows, float* dst, int64_t ld_dst,
               const int32_t* host_dst_rows, int64_t n, int64_t cols, cudaStream_t stream) {
    if (n <= 0 || cols <= 0) return;
    RowPairs pairs{};
    int m = 0;
    std::vector<int32_t> seen;  // destinations in this launch
    auto flush = [&] {
        if (m == 0) return;
        const int64_t total = int64_t(m) * cols;
        const unsigned grid = std::min<unsigned>(blocks_for(total, 256), 65535u);
        copy_rows_kernel<<<grid, 256, 0, stream>>>(src, ld_src, dst, ld_dst, pairs, m, cols);
        check_launch("copy_rows_kernel");
        m = 0;
        seen.clear();
    };
    for (int64_t i = 0; i < n; ++i) {
        // A destination written twice in one launch would race; the CPU's
        // sequential copy lets the later pair win, so the launch ends first.
        if (m == kPairsPerLaunch || std::find(seen.begin(), seen.end(), host_dst_rows[i]) != seen.end()) flush();
        pairs.src[m] = host_src_rows[i];
        pairs.dst[m] = host_dst_rows[i];
        seen.push_back(host_dst_rows[i]);
        ++m;
    }
    flush();
}

}  // namespace ds4::cuda

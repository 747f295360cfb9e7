// The lightning indexer on the GPU: per query row, the score of every
// visible compressed key (sum over heads of w_h * relu(q_h . k)), then an
// exact top-k by radix select. The scores repeat the CPU backend's float
// operations in its order (sequential dot over the head dimension, then over
// heads; each product and sum rounded on its own), so both backends score
// bit for bit alike and choose the same rows, ties included.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops_deepseek4.h"

namespace ds4::cuda {
namespace {

constexpr int kScoreThreads = 128;  // one key per thread
constexpr int kHeadTile = 16;       // head dots kept in registers at a time
constexpr size_t kQueryShared = 48 * 1024;

// Key row j of query t's set.
__device__ int64_t set_row(const RowSetsView& v, int64_t t, int64_t j) {
    return v.rows ? int64_t(v.rows[t * v.cap + j]) : int64_t(v.base[t]) + j;
}

// Block (key tile, query row). The query's heads sit in shared memory when
// they fit (Flash: 64 x 128 floats = 32 KiB) and are read from global
// memory otherwise; every thread of a warp reads the same q value (broadcast).
__global__ void indexer_scores_kernel(const float* q, int64_t ld_q, const float* w, int64_t ld_w, int n_head, int dim,
                                      const float* keys, RowSetsView visible, float* scores, int64_t ld_scores,
                                      bool q_in_shared) {
    wait_for_inputs();
    extern __shared__ float qs[];
    const int64_t t = blockIdx.y;
    const int64_t nv = visible.count[t];
    const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (int64_t(blockIdx.x) * blockDim.x >= nv) return;  // whole block past the visible keys
    const float* qt = q + t * ld_q;
    if (q_in_shared) {
        for (int i = threadIdx.x; i < n_head * dim; i += blockDim.x) qs[i] = qt[i];
        __syncthreads();
        qt = qs;
    }
    if (j >= nv) return;
    const float* k = keys + set_row(visible, t, j) * dim;
    const float* wt = w + t * ld_w;
    float acc = 0.0f;
    for (int h0 = 0; h0 < n_head; h0 += kHeadTile) {
        const int nh = min(kHeadTile, n_head - h0);
        float dot[kHeadTile];
#pragma unroll
        for (int hh = 0; hh < kHeadTile; ++hh) dot[hh] = 0.0f;
        for (int d = 0; d < dim; ++d) {
            const float kd = k[d];
#pragma unroll
            for (int hh = 0; hh < kHeadTile; ++hh)
                if (hh < nh) dot[hh] = __fadd_rn(dot[hh], __fmul_rn(qt[(h0 + hh) * dim + d], kd));
        }
#pragma unroll
        for (int hh = 0; hh < kHeadTile; ++hh)
            if (hh < nh) acc = __fadd_rn(acc, __fmul_rn(fmaxf(dot[hh], 0.0f), wt[h0 + hh]));
    }
    scores[t * ld_scores + j] = acc;
}

// The same scores with a warp per key: lane l takes heads l, l + 32, ... (up
// to kWarpHeadsPerLane each), each head's dot in the same sequential order
// over the dimensions, then lane 0 sums the heads in order from the lanes'
// registers: the same float operations in the same order as above, so the
// same bits. The query's heads sit in shared memory with rows padded to
// dim + 1 floats (lanes read different heads at the same dimension: without
// the pad a dimension of 128 puts them all in one bank). One thread per key
// gave a decode step only count / 128 blocks, a few SMs: 85 us a layer at
// 512 keys (GLM-5, H200, 2026-12-04).
constexpr int kWarpKeys = 8;  // warps (keys) a block
constexpr int kWarpHeadsPerLane = 4;
__global__ void indexer_scores_warp_kernel(const float* __restrict__ q, int64_t ld_q, const float* __restrict__ w,
                                           int64_t ld_w, int n_head, int dim, const float* __restrict__ keys,
                                           RowSetsView visible, float* __restrict__ scores, int64_t ld_scores) {
    wait_for_inputs();
    extern __shared__ float qs[];
    const int64_t t = blockIdx.y;
    const int64_t nv = visible.count[t];
    if (int64_t(blockIdx.x) * kWarpKeys >= nv) return;  // whole block past the visible keys
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float* qt = q + t * ld_q;
    const int pitch = dim + 1;
    for (int i = threadIdx.x; i < n_head * dim; i += blockDim.x) qs[(i / dim) * pitch + i % dim] = qt[i];
    __syncthreads();
    const int64_t j = int64_t(blockIdx.x) * kWarpKeys + warp;
    if (j >= nv) return;
    const float* k = keys + set_row(visible, t, j) * dim;
    float dot[kWarpHeadsPerLane];
#pragma unroll
    for (int i = 0; i < kWarpHeadsPerLane; ++i) dot[i] = 0.0f;
    for (int d = 0; d < dim; ++d) {
        const float kd = __ldg(k + d);  // the same address for every lane
#pragma unroll
        for (int i = 0; i < kWarpHeadsPerLane; ++i) {
            const int h = lane + 32 * i;
            if (h < n_head) dot[i] = __fadd_rn(dot[i], __fmul_rn(qs[h * pitch + d], kd));
        }
    }
    const float* wt = w + t * ld_w;
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < kWarpHeadsPerLane; ++i)
        for (int l = 0; l < 32; ++l) {
            const int h = l + 32 * i;
            const float v = __shfl_sync(0xffffffffu, dot[i], l);
            if (h < n_head) acc = __fadd_rn(acc, __fmul_rn(fmaxf(v, 0.0f), wt[h]));
        }
    if (lane == 0) scores[t * ld_scores + j] = acc;
}

// Order-preserving map of a float to an unsigned key: larger float, larger
// key. -0 becomes +0 first, since the CPU's comparisons see them equal.
__device__ uint32_t order_key(float f) {
    const uint32_t u = __float_as_uint(f + 0.0f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

constexpr int kSelectThreads = 256;
constexpr int kSelectWarps = kSelectThreads / 32;

// Exclusive prefix count of `flag` over the block in thread order; `total`
// gets the block's count. All threads must call it.
__device__ int block_exclusive_count(bool flag, int* warp_counts, int& total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned ballot = __ballot_sync(0xffffffffu, flag);
    if (lane == 0) warp_counts[warp] = __popc(ballot);
    __syncthreads();
    int before = __popc(ballot & ((1u << lane) - 1u));
    total = 0;
    for (int i = 0; i < kSelectWarps; ++i) {
        if (i < warp) before += warp_counts[i];
        total += warp_counts[i];
    }
    __syncthreads();  // warp_counts is reused by the next call
    return before;
}

// One block per query row: four 8-bit radix passes find the key of the
// top_k-th best score, then one pass in index order writes every row above
// it and the lowest-index rows equal to it (the CPU's tie rule), so the list
// comes out ascending like the CPU's sorted one.
__global__ void indexer_topk_kernel(const float* scores, int64_t ld_scores, RowSetsView visible, int64_t top_k,
                                    int32_t* out, int32_t* out_count) {
    wait_for_inputs();
    const int64_t t = blockIdx.x;
    const int64_t nv = top_k > 0 ? visible.count[t] : 0;
    if (nv <= top_k) {  // the whole set
        for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) out[t * top_k + j] = int32_t(set_row(visible, t, j));
        if (threadIdx.x == 0) out_count[t] = int32_t(nv);
        return;
    }
    if (threadIdx.x == 0) out_count[t] = int32_t(top_k);
    const float* s = scores + t * ld_scores;
    __shared__ int hist[256];
    __shared__ uint32_t sh_prefix;
    __shared__ int64_t sh_remaining;
    __shared__ int warp_counts[kSelectWarps];
    uint32_t prefix = 0, mask = 0;
    int64_t remaining = top_k;  // how many of the rows matching `prefix` still belong to the top k
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
        __syncthreads();
        for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) {
            const uint32_t key = order_key(s[j]);
            if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 0xFFu], 1);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int64_t above = 0;
            int b = 255;
            for (; b > 0; --b) {
                if (above + hist[b] >= remaining) break;
                above += hist[b];
            }
            sh_prefix = prefix | (uint32_t(b) << shift);
            sh_remaining = remaining - above;
        }
        __syncthreads();
        prefix = sh_prefix;
        remaining = sh_remaining;
        mask |= 0xFFu << shift;
        __syncthreads();  // hist is cleared again next pass
    }
    // prefix is now the threshold key; `remaining` rows equal to it are taken.
    int64_t written = 0, equal_seen = 0;
    for (int64_t base = 0; base < nv; base += blockDim.x) {
        const int64_t j = base + threadIdx.x;
        const uint32_t key = j < nv ? order_key(s[j]) : 0u;
        const bool eq = j < nv && key == prefix;
        int eq_total = 0, sel_total = 0;
        const int eq_before = block_exclusive_count(eq, warp_counts, eq_total);
        const bool take = j < nv && (key > prefix || (eq && equal_seen + eq_before < remaining));
        const int pos = block_exclusive_count(take, warp_counts, sel_total);
        if (take) out[t * top_k + written + pos] = int32_t(set_row(visible, t, j));
        written += sel_total;
        equal_seen += eq_total;
        if (written >= top_k) break;  // uniform across the block
    }
}

}  // namespace

void indexer_scores(const float* q, int64_t ld_q, const float* w, int64_t ld_w, int n_head, int head_dim,
                    const float* keys, const RowSetsView& visible, int64_t n_rows, float* scores, int64_t ld_scores,
                    cudaStream_t stream) {
    if (n_rows <= 0 || visible.cap <= 0) return;
    const size_t q_bytes = sizeof(float) * size_t(n_head) * size_t(head_dim);
    const bool shared = q_bytes <= kQueryShared;
    const size_t padded_bytes = sizeof(float) * size_t(n_head) * size_t(head_dim + 1);
    const bool warp_kernel = n_head <= 32 * kWarpHeadsPerLane && padded_bytes <= kQueryShared &&
                             (visible.cap + kWarpKeys - 1) / kWarpKeys <= INT32_MAX;
    constexpr int64_t kMaxY = 65535;  // query rows go on grid y
    for (int64_t r0 = 0; r0 < n_rows; r0 += kMaxY) {
        const int64_t nr = std::min(kMaxY, n_rows - r0);
        RowSetsView v = visible;
        v.count += r0;
        if (v.base) v.base += r0;
        if (v.rows) v.rows += r0 * v.cap;
        // Blocks past a row's count return at once: the grid covers the cap.
        if (warp_kernel) {
            const dim3 grid(unsigned((visible.cap + kWarpKeys - 1) / kWarpKeys), unsigned(nr));
            launch(indexer_scores_warp_kernel, grid, 32 * kWarpKeys, padded_bytes, stream, 
                q + r0 * ld_q, ld_q, w + r0 * ld_w, ld_w, n_head, head_dim, keys, v, scores + r0 * ld_scores,
                ld_scores);
            check_launch("indexer_scores_warp_kernel");
            continue;
        }
        const dim3 grid(blocks_for(visible.cap, kScoreThreads), unsigned(nr));
        launch(indexer_scores_kernel, grid, kScoreThreads, shared ? q_bytes : 0, stream, 
            q + r0 * ld_q, ld_q, w + r0 * ld_w, ld_w, n_head, head_dim, keys, v, scores + r0 * ld_scores, ld_scores,
            shared);
        check_launch("indexer_scores_kernel");
    }
}

void indexer_select_topk(const float* scores, int64_t ld_scores, const RowSetsView& visible, int64_t n_rows,
                         int64_t top_k, int32_t* out_rows, int32_t* out_count, cudaStream_t stream) {
    if (n_rows <= 0) return;
    // n_rows is grid x (up to 2^31 - 1).
    launch(indexer_topk_kernel, unsigned(n_rows), kSelectThreads, 0, stream, scores, ld_scores, visible, top_k, out_rows,
                                                                         out_count);
    check_launch("indexer_topk_kernel");
}

}  // namespace ds4::cuda

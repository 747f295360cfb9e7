// The k best values of each row (a sampler's candidates from a row of
// logits), one block per row, so a decode step's logits never leave the
// device: 8 sequences x 151,936 logits were 4.9 MB copied to the host and
// scanned there every step, against a few hundred bytes of candidates.
//
// k = 1 (greedy) is one pass: a block argmax. Otherwise a radix select finds
// the k-th largest value exactly (four passes of 8 bits over order-preserving
// keys of the row, which stays in L2), then one pass collects the values
// above it and the lowest columns among those equal to it, and a rank sort
// orders the k candidates. The order is the CPU backend's: value descending,
// equal values by lower column, -0 equal to +0.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"
#include "common/error.h"

namespace ds4::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxK = 128;   // Backend::kMaxTopK
constexpr int kMaxTies = 512;  // values equal to the k-th gathered by atomics; more take the ordered scan

// Larger key = larger value; -0 maps to +0's key (they are equal values).
// NaN gets some key: its row is flagged and its candidates mean nothing.
__device__ __forceinline__ uint32_t order_key(float v) {
    if (v == 0.0f) v = 0.0f;
    const uint32_t b = __float_as_uint(v);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ bool is_bad(float v) { return isnan(v) || v == INFINITY; }

// a before b in the sampler's order; NaN counts as -infinity.
__device__ __forceinline__ bool better(float a, int ia, float b, int ib) {
    if (isnan(a)) a = -INFINITY;
    if (isnan(b)) b = -INFINITY;
    return a > b || (a == b && ia < ib);
}

// The warp's best (value, column) and lowest bad column, in every lane.
__device__ __forceinline__ void warp_best(float& best, int& best_id, int& bad) {
    for (int o = 16; o > 0; o >>= 1) {
        const float v = __shfl_xor_sync(0xffffffffu, best, o);
        const int id = __shfl_xor_sync(0xffffffffu, best_id, o);
        bad = min(bad, __shfl_xor_sync(0xffffffffu, bad, o));
        if (better(v, id, best, best_id)) {
            best = v;
            best_id = id;
        }
    }
}

__global__ void __launch_bounds__(kThreads) argmax_rows_kernel(const float* __restrict__ x, int64_t cols,
                                                               float* __restrict__ values, int32_t* __restrict__ ids,
                                                               int32_t* __restrict__ first_bad) {
    wait_for_inputs();
    __shared__ float s_val[kWarps];
    __shared__ int s_id[kWarps];
    __shared__ int s_bad[kWarps];
    const float* row = x + int64_t(blockIdx.x) * cols;
    float best = -INFINITY;
    int best_id = INT_MAX, bad = INT_MAX;
    for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
        const float v = row[i];
        if (is_bad(v) && int(i) < bad) bad = int(i);
        if (better(v, int(i), best, best_id)) {
            best = v;
            best_id = int(i);
        }
    }
    warp_best(best, best_id, bad);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) {
        s_val[warp] = best;
        s_id[warp] = best_id;
        s_bad[warp] = bad;
    }
    __syncthreads();
    if (warp != 0) return;
    best = s_val[lane];
    best_id = s_id[lane];
    bad = s_bad[lane];
    warp_best(best, best_id, bad);
    if (lane == 0) {
        // A row of NaNs only still names a column (its candidates mean nothing).
        if (best_id == INT_MAX) best_id = 0;
        values[blockIdx.x] = row[best_id];
        ids[blockIdx.x] = best_id;
        first_bad[blockIdx.x] = bad == INT_MAX ? -1 : bad;
    }
}

__global__ void __launch_bounds__(kThreads) top_k_rows_kernel(const float* __restrict__ x, int64_t cols, int k,
                                                              float* __restrict__ values, int32_t* __restrict__ ids,
                                                              int32_t* __restrict__ first_bad) {
    wait_for_inputs();
    __shared__ uint32_t s_hist[256];
    __shared__ uint32_t s_prefix, s_mask;
    __shared__ int s_remaining, s_ties_total, s_bad;
    __shared__ int s_above, s_ties;
    __shared__ int s_cand_id[kMaxK];
    __shared__ int s_tie_id[kMaxTies];
    __shared__ int s_warp_count[kWarps];
    const float* row = x + int64_t(blockIdx.x) * cols;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    if (tid == 0) {
        s_prefix = 0;
        s_mask = 0;
        s_remaining = k;
        s_bad = INT_MAX;
        s_above = 0;
        s_ties = 0;
    }
    // Radix select: after the pass for bits [shift, shift + 8), the prefix
    // holds those bits of the k-th largest key and s_remaining how many keys
    // with that prefix still belong to the best k.
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = tid; i < 256; i += kThreads) s_hist[i] = 0;
        __syncthreads();
        const uint32_t prefix = s_prefix, mask = s_mask;
        int bad = INT_MAX;
        for (int64_t i = tid; i < cols; i += kThreads) {
            const float v = row[i];
            if (shift == 24 && is_bad(v) && int(i) < bad) bad = int(i);
            const uint32_t key = order_key(v);
            if ((key & mask) == prefix) atomicAdd(&s_hist[(key >> shift) & 255u], 1u);
        }
        if (shift == 24 && bad != INT_MAX) atomicMin(&s_bad, bad);
        __syncthreads();
        if (warp == 0) {
            // Lane l holds digits 255 - 8l - j, j < 8 (the largest first).
            uint32_t counts[8], sum = 0;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                counts[j] = s_hist[255 - 8 * lane - j];
                sum += counts[j];
            }
            uint32_t before = sum;  // inclusive scan over lanes, then exclusive
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const uint32_t v = __shfl_up_sync(0xffffffffu, before, o);
                if (lane >= o) before += v;
            }
            before -= sum;
            const uint32_t need = uint32_t(s_remaining);
            if (before < need && need <= before + sum) {
                uint32_t above = before;
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    if (above < need && need <= above + counts[j]) {
                        const uint32_t digit = uint32_t(255 - 8 * lane - j);
                        s_prefix = prefix | (digit << shift);
                        s_mask = mask | (255u << shift);
                        s_remaining = int(need - above);
                        if (shift == 0) s_ties_total = int(counts[j]);
                    }
                    above += counts[j];
                }
            }
        }
        __syncthreads();
    }
    const uint32_t kth = s_prefix;
    const int take_ties = s_remaining;  // of the keys equal to kth, the lowest columns
    const int n_above = k - take_ties;
    const bool few_ties = s_ties_total <= kMaxTies;
    for (int64_t i = tid; i < cols; i += kThreads) {
        const uint32_t key = order_key(row[i]);
        if (key > kth) {
            s_cand_id[atomicAdd(&s_above, 1)] = int(i);
        } else if (key == kth && few_ties) {
            s_tie_id[atomicAdd(&s_ties, 1)] = int(i);
        }
    }
    __syncthreads();
    if (few_ties) {
        // The lowest `take_ties` columns of the ties: rank by column.
        const int n_ties = s_ties;
        for (int t = tid; t < n_ties; t += kThreads) {
            const int c = s_tie_id[t];
            int rank = 0;
            for (int u = 0; u < n_ties; ++u) rank += s_tie_id[u] < c;
            if (rank < take_ties) s_cand_id[n_above + rank] = c;
        }
    } else {
        // Many equal values (a row of banned -infinity tokens, say): walk
        // the row in column order, a block of columns at a time.
        int taken = 0;
        for (int64_t base = 0; base < cols && taken < take_ties; base += kThreads) {
            const int64_t i = base + tid;
            const bool tie = i < cols && order_key(row[i]) == kth;
            const unsigned ballot = __ballot_sync(0xffffffffu, tie);
            if (lane == 0) s_warp_count[warp] = __popc(ballot);
            __syncthreads();
            int rank = taken + __popc(ballot & ((1u << lane) - 1u));
            for (int w = 0; w < warp; ++w) rank += s_warp_count[w];
            if (tie && rank < take_ties) s_cand_id[n_above + rank] = int(i);
            int total = 0;
            for (int w = 0; w < kWarps; ++w) total += s_warp_count[w];
            __syncthreads();
            taken += total;
        }
    }
    __syncthreads();
    if (tid < k) {
        const int c = s_cand_id[tid];
        const float v = row[c];
        int rank = 0;
        for (int u = 0; u < k; ++u) {
            const int cu = s_cand_id[u];
            rank += better(row[cu], cu, v, c);
        }
        values[int64_t(blockIdx.x) * k + rank] = v;
        ids[int64_t(blockIdx.x) * k + rank] = c;
    }
    if (tid == 0) first_bad[blockIdx.x] = s_bad == INT_MAX ? -1 : s_bad;
}

}  // namespace

void top_k_rows(const float* x, int64_t rows, int64_t cols, int k, float* values, int32_t* ids, int32_t* first_bad,
                cudaStream_t stream) {
    if (rows <= 0) return;
    if (k < 1 || k > kMaxK || k > cols || cols > INT32_MAX || rows > INT32_MAX)
        throw Error("CUDA top_k_rows: " + std::to_string(k) + " best of rows of " + std::to_string(cols) +
                    " values is not supported.");
    if (k == 1) {
        launch(argmax_rows_kernel, unsigned(rows), kThreads, 0, stream, x, cols, values, ids, first_bad);
        check_launch("argmax_rows_kernel");
    } else {
        launch(top_k_rows_kernel, unsigned(rows), kThreads, 0, stream, x, cols, k, values, ids, first_bad);
        check_launch("top_k_rows_kernel");
    }
}

}  // namespace ds4::cuda

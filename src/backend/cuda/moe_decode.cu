// MoE on the device for decode-sized batches: routing (softmax or
// sqrt-softplus scores, top-k) and the routed-expert FFN in two launches per
// layer whatever the number of experts (gate + up + SwiGLU, down + weighted
// sum over slots; the fused kernels below), or five for types and shapes
// they do not take (gate, up, SwiGLU, down, combine). Only the chosen
// experts' rows are read, and nothing comes back to the host, so a decode
// step can be recorded as a CUDA graph.
#include <cfloat>
#include <climits>
#include <cstdlib>

#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/env_switch.h"
#include "backend/cuda/moe_epilogue.cuh"
#include "backend/cuda/q4k_wide_dot.cuh"
#include "backend/cuda/quant_decode.cuh"
#include "backend/cuda/route_warp.cuh"
#include "backend/cuda/warp_dot.cuh"

namespace ds4::cuda {
namespace {

// One warp per token: top-k is n_used rounds of an argmax, and with one warp
// a round is shuffles only (8 warps spent ~11 us a layer in barriers).
constexpr int kRouteThreads = 32;
constexpr int kWarps = 4;

// Block-wide argmax over (value desc, index asc); every thread gets the winner.
__device__ void block_argmax(float v, int i, float* sv, int* si, float& best_v, int& best_i) {
    for (int off = 16; off > 0; off >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, v, off);
        const int oi = __shfl_xor_sync(0xffffffffu, i, off);
        if (ov > v || (ov == v && oi < i)) {
            v = ov;
            i = oi;
        }
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) {
        sv[warp] = v;
        si[warp] = i;
    }
    __syncthreads();
    best_v = sv[0];
    best_i = si[0];
    for (int w = 1; w < int(blockDim.x >> 5); ++w)
        if (sv[w] > best_v || (sv[w] == best_v && si[w] < best_i)) {
            best_v = sv[w];
            best_i = si[w];
        }
    __syncthreads();
}

// One block per token. score: the routing probabilities (kept for the
// weights); sel: what top-k ranks (score + bias for DeepSeek V4). Mirrors
// CpuBackend::route_softmax_topk / route_sqrt_softplus.
template <bool kSoftmax>
__global__ void route_kernel(const float* __restrict__ logits, int n_exp, int n_used, const float* __restrict__ bias,
                             const int32_t* __restrict__ forced, const int32_t* __restrict__ forced_rows, bool norm,
                             float w_scale, int32_t* experts, float* weights) {
    wait_for_inputs();
    extern __shared__ float sh[];
    float* score = sh;         // n_exp
    float* sel = sh + n_exp;   // n_exp
    __shared__ float sv[32];
    __shared__ int si[32];
    __shared__ double ssum[32];
    __shared__ int chosen[64];
    const int t = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int nw = int(blockDim.x >> 5);
    const float* l = logits + int64_t(t) * n_exp;

    if constexpr (kSoftmax) {
        float mx = -FLT_MAX;
        int dummy = 0;
        for (int e = tid; e < n_exp; e += blockDim.x) mx = fmaxf(mx, l[e]);
        float bv;
        block_argmax(mx, 0, sv, si, bv, dummy);
        mx = bv;
        double part = 0.0;
        for (int e = tid; e < n_exp; e += blockDim.x) {
            const float p = expf(l[e] - mx);
            score[e] = p;
            part += p;
        }
        for (int off = 16; off > 0; off >>= 1) part += __shfl_xor_sync(0xffffffffu, part, off);
        if (lane == 0) ssum[warp] = part;
        __syncthreads();
        double sum = 0.0;
        for (int w = 0; w < nw; ++w) sum += ssum[w];
        for (int e = tid; e < n_exp; e += blockDim.x) {
            score[e] = float(score[e] / sum);
            sel[e] = score[e];
        }
    } else {
        for (int e = tid; e < n_exp; e += blockDim.x) {
            const float sp = l[e] > 20.0f ? l[e] : logf(1.0f + expf(l[e]));
            score[e] = sqrtf(sp);
            sel[e] = bias ? score[e] + bias[e] : score[e];
        }
    }
    __syncthreads();

    if (forced) {
        const int64_t row = forced_rows ? int64_t(forced_rows[t]) : int64_t(t);
        if (tid < n_used) chosen[tid] = forced[row * n_used + tid];
        __syncthreads();
    } else {
        for (int j = 0; j < n_used; ++j) {
            float v = -FLT_MAX;
            int i = INT_MAX;
            for (int e = tid; e < n_exp; e += blockDim.x)
                if (sel[e] > v || (sel[e] == v && e < i)) {
                    v = sel[e];
                    i = e;
                }
            float bv;
            int bi;
            block_argmax(v, i, sv, si, bv, bi);
            if (tid == 0) {
                chosen[j] = bi;
                sel[bi] = -INFINITY;  // taken
            }
            __syncthreads();
        }
    }
    if (tid == 0) {
        double wsum = 0.0;
        for (int j = 0; j < n_used; ++j) wsum += score[chosen[j]];
        for (int j = 0; j < n_used; ++j) {
            const float s = score[chosen[j]];
            float w;
            if constexpr (kSoftmax) {
                const double denom = norm ? fmax(wsum, 6.103515625e-5) : 1.0;
                w = float(s / denom);
            } else {
                const float denom = norm ? fmaxf(float(wsum), 6.103515625e-5f) : 1.0f;
                w = norm ? s / denom : s;
            }
            if (w_scale != 0.0f && w_scale != 1.0f) w *= w_scale;
            experts[int64_t(t) * n_used + j] = chosen[j];
            weights[int64_t(t) * n_used + j] = w;
        }
    }
}

// route_kernel for up to 32 * kPer experts and 32 used, not forced: a warp
// a token (route_warp.cuh).
template <bool kSoftmax, int kPer>
__global__ void route_warp_kernel(const float* __restrict__ logits, int n_exp, int n_used,
                                  const float* __restrict__ bias, bool norm, float w_scale, int32_t* experts,
                                  float* weights) {
    wait_for_inputs();
    const int64_t t = blockIdx.x;
    route_warp_row<kSoftmax, kPer>(logits + t * n_exp, n_exp, n_used, bias, norm, w_scale, experts + t * n_used,
                                   weights + t * n_used);
}

// y[p][r] = W_{experts[p]}[r] . x[p / x_div]: one warp per (row, pair).
template <GgmlType T, bool kWarpDot>
__global__ void expert_matvec_kernel(const uint8_t* __restrict__ w, size_t matrix_bytes, size_t row_bytes, int64_t k,
                                     int64_t n_rows, const int32_t* __restrict__ experts, int x_div,
                                     const float* __restrict__ x, int64_t ld_x, float* __restrict__ y, int64_t ld_y) {
    wait_for_inputs();
    const int p = blockIdx.y;
    const int64_t e = experts[p];
    float acc[1];
    if constexpr (kWarpDot) {
        // One row per block (block_row_dot).
        const int64_t r = blockIdx.x;
        block_row_dot<T, 1>(w + size_t(e) * matrix_bytes + size_t(r) * row_bytes, k, x + int64_t(p / x_div) * ld_x,
                            ld_x, 1, acc);
        if (threadIdx.x == 0) y[int64_t(p) * ld_y + r] = acc[0];
    } else {
        const int lane = threadIdx.x & 31;
        const int64_t r = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
        if (r >= n_rows) return;
        lane_dot<T, 1>(w + size_t(e) * matrix_bytes + size_t(r) * row_bytes, k, x + int64_t(p / x_div) * ld_x, ld_x, 1,
                       lane, acc);
        const float s = warp_sum(acc[0]);
        if (lane == 0) y[int64_t(p) * ld_y + r] = s;
    }
}

// Pairs stride over grid.y (at most 65535 blocks), so a prefill batch of
// any size fits one launch.
__global__ void expert_swiglu_kernel(const float* __restrict__ g, const float* __restrict__ u,
                                     const int32_t* __restrict__ experts, int64_t n_pairs, int64_t n_ff, const float* gs,
                                     int64_t n_gs, const float* us, int64_t n_us, float limit, float* __restrict__ h) {
    wait_for_inputs();
  for (int64_t p = blockIdx.y; p < n_pairs; p += gridDim.y) {
    const int64_t e = gs || us ? experts[p] : 0;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n_ff; i += int64_t(gridDim.x) * blockDim.x)
        h[p * n_ff + i] = expert_swiglu_value(g[p * n_ff + i], u[p * n_ff + i], e, gs, n_gs, us, n_us, limit);
  }
}

// out[t][c] = sum over slots j, in slot order, of d[p][c] * (w * ds[e]), p = t*n_used+j.
// Tokens stride over grid.y, as pairs above.
__global__ void expert_combine_kernel(const float* __restrict__ d, const int32_t* __restrict__ experts, const float* __restrict__ weights,
                                      const float* ds, int64_t n_ds, int64_t n_tok, int n_used, int64_t n_embd,
                                      float* __restrict__ out) {
    wait_for_inputs();
  for (int64_t t = blockIdx.y; t < n_tok; t += gridDim.y) {
    for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < n_embd; c += int64_t(gridDim.x) * blockDim.x)
        out[t * n_embd + c] = weighted_slot_sum([&](int j) { return d[(t * n_used + j) * n_embd + c]; }, t, n_used,
                                                experts, weights, ds, n_ds);
  }
}

// ---- fused decode path: two launches per layer -------------------------------
//
// The five-launch path above runs one 4-warp block per (row, pair): an
// expert row of a 2-bit type is 8-16 warp steps, so each block lives for a
// few loads and the 2-bit experts ran at 55-73 GB/s (H200 profile,
// 2026-12-01). The fused kernels give every warp whole rows, reuse each
// activation load for two rows, and drop the g/u/d round trips through
// device memory and three launches.

// h[p][r] = SwiGLU(gate_e[r] . x, up_e[r] . x) for e = experts[p]: one warp per
// (row, pair), the gate and up rows of a step sharing the activation loads.
// The epilogue is expert_swiglu_kernel's expression, so h matches the
// five-launch path bit for bit when the dots do.
constexpr int kFusedWarps = 4;
// kStage: the warp first copies its gate and up rows into shared memory with
// 16-byte cp.async (rows of row_bytes % 16 == 0, 16-byte aligned), then
// decodes from there; otherwise dot_step reads global memory directly.
template <GgmlType T, bool kStage>
__global__ void __launch_bounds__(32 * kFusedWarps)
    expert_gate_up_kernel(const uint8_t* __restrict__ gw, const uint8_t* __restrict__ uw, size_t matrix_bytes,
                          size_t row_bytes, int64_t k, int64_t n_ff, const int32_t* __restrict__ experts, int x_div,
                          const float* __restrict__ x, int64_t ld_x, const float* gs, int64_t n_gs, const float* us,
                          int64_t n_us, float limit, float* __restrict__ h) {
    wait_for_inputs();
    const int lane = threadIdx.x & 31;
    const int64_t r = int64_t(blockIdx.x) * kFusedWarps + (threadIdx.x >> 5);
    const int64_t p = blockIdx.y;
    if (r >= n_ff) return;
    const int64_t e = experts[p];
    const size_t off = size_t(e) * matrix_bytes + size_t(r) * row_bytes;
    const uint8_t* rows[2] = {gw + off, uw + off};
    if constexpr (kStage) {
        extern __shared__ uint4 stage[];
        const int n16 = int(row_bytes / 16);
        uint4* buf = stage + size_t(threadIdx.x >> 5) * 2 * n16;
        warp_stage(buf, reinterpret_cast<const uint4*>(rows[0]), n16, lane);
        warp_stage(buf + n16, reinterpret_cast<const uint4*>(rows[1]), n16, lane);
        warp_stage_wait();
        rows[0] = reinterpret_cast<const uint8_t*>(buf);
        rows[1] = reinterpret_cast<const uint8_t*>(buf + n16);
    }
    const float* xp = x + (p / x_div) * ld_x;
    float acc[2] = {0.0f, 0.0f};
    const int64_t n_steps = k / 256;
#pragma unroll 2
    for (int64_t s = 0; s < n_steps; ++s) dot_step<T, 2>(rows, s, xp, lane, acc);
    const float gv = warp_sum(acc[0]), uv = warp_sum(acc[1]);
    if (lane == 0) h[p * n_ff + r] = expert_swiglu_value(gv, uv, e, gs, n_gs, us, n_us, limit);
}

// expert_gate_up_kernel for Q4_K rows, four row indices a warp
// (q4k_wide_dot.cuh): warp w of block x takes rows (x * kWideWarps + w) * 4
// and the three after it, of pair blockIdx.y.
__global__ void __launch_bounds__(32 * kWideWarps)
    expert_gate_up_q4k_wide_kernel(const uint8_t* __restrict__ gw, const uint8_t* __restrict__ uw, size_t matrix_bytes,
                                   size_t row_bytes, int64_t k, int64_t n_ff, const int32_t* __restrict__ experts,
                                   int x_div, const float* __restrict__ x, int64_t ld_x, const float* gs, int64_t n_gs,
                                   const float* us, int64_t n_us, float limit, float* __restrict__ h) {
    wait_for_inputs();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t r0 = (int64_t(blockIdx.x) * kWideWarps + warp) * kWideRows;
    const int64_t p = blockIdx.y;
    if (r0 >= n_ff) return;
    const int n_here = n_ff - r0 < kWideRows ? int(n_ff - r0) : kWideRows;
    const int64_t e = experts[p];
    extern __shared__ uint4 stage[];
    const int n16 = int(row_bytes / 16);
    const uint8_t *gate, *up;
    q4k_wide_stage(stage + size_t(warp) * 2 * kWideRows * n16, gw, uw, size_t(e) * matrix_bytes + size_t(r0) * row_bytes,
                   n16, n_here, lane, gate, up);
    const float* const xs[1] = {x + (p / x_div) * ld_x};
    float acc[2][1] = {{0.0f}, {0.0f}};
    const int64_t n_steps = k / 256;
#pragma unroll 2
    for (int64_t s = 0; s < n_steps; ++s) q4k_gate_up_wide_step<1>(gate, up, s, xs, lane & 7, acc);
    const float gv = row8_sum(acc[0][0]), uv = row8_sum(acc[1][0]);
    const int g = lane >> 3;
    if ((lane & 7) == 0 && g < n_here)
        h[p * n_ff + r0 + g] = expert_swiglu_value(gv, uv, e, gs, n_gs, us, n_us, limit);
}

// out[t][c] = sum over slots j in order of (down_e[c] . h[p]) * (w[p] * ds[e]),
// p = t * n_used + j, e = experts[p]: one block per kDownRows output rows of
// a token, warp j taking slot j (both rows share its activation loads); the
// slot sums meet in shared memory and are added in slot order, with
// expert_combine_kernel's expression.
constexpr int kDownRows = 2;
constexpr int kFusedMaxSlots = 16;
// A down warp's 16-byte pieces of shared memory: its kDownRows rows and up
// to 15 bytes before them.
__host__ __device__ constexpr size_t down_stage_pieces(size_t row_bytes) { return (15 + kDownRows * row_bytes + 15) / 16; }
// Whether the down rows may be staged although they are not 16-byte rows:
// each expert's matrix starts and ends on 16 bytes (so the pieces around a
// row never leave it) and rows are 2-byte aligned. DS4_CUDA_DOWN_STAGE=1
// (A/B; read once): Q6_K downs (210-byte blocks) and the other short-block
// types then read 16-byte pieces instead of the dot's own 2-4 byte loads.
bool down_stage_any() {
    static const bool on = env_switch("DS4_CUDA_DOWN_STAGE", false);
    return on;
}
size_t down_stage_bytes(const uint8_t* down, size_t matrix_bytes, size_t row_bytes, int n_used) {
    const size_t bytes = down_stage_pieces(row_bytes) * 16 * size_t(n_used);
    if (bytes > 48 * 1024) return 0;
    const bool whole_pieces = reinterpret_cast<uintptr_t>(down) % 16 == 0 && matrix_bytes % 16 == 0;
    if (whole_pieces && row_bytes % 16 == 0) return bytes;
    return whole_pieces && row_bytes % 2 == 0 && down_stage_any() ? bytes : 0;
}
template <GgmlType T, bool kStage>
__global__ void __launch_bounds__(32 * kFusedMaxSlots)
    expert_down_combine_kernel(const uint8_t* __restrict__ dw, size_t matrix_bytes, size_t row_bytes, int64_t k,
                               int64_t n_embd, const int32_t* __restrict__ experts,
                               const float* __restrict__ weights, const float* ds, int64_t n_ds, int n_used,
                               const float* __restrict__ h, float* __restrict__ out) {
    wait_for_inputs();
    __shared__ float part[kFusedMaxSlots][kDownRows];
    __shared__ float factor[kFusedMaxSlots];
    const int lane = threadIdx.x & 31, j = threadIdx.x >> 5;
    const int64_t t = blockIdx.y, c0 = int64_t(blockIdx.x) * kDownRows;
    const int64_t p = t * n_used + j;
    const int64_t e = experts[p];
    const float wf = slot_factor(p, e, weights, ds, n_ds);  // stored with the dot, below
    const uint8_t* rows[kDownRows];
#pragma unroll
    for (int i = 0; i < kDownRows; ++i)  // a row past the end repeats the last one; its sum is not stored
        rows[i] = dw + size_t(e) * matrix_bytes + size_t(c0 + i < n_embd ? c0 + i : n_embd - 1) * row_bytes;
    if constexpr (kStage) {
        // The block's rows are consecutive: one copy of the 16-byte pieces
        // that cover them. Rows of a 2-byte aligned type (Q6_K: 210-byte
        // blocks) start inside a piece; they keep that offset in shared
        // memory, so every load the dot makes stays as aligned as it was.
        extern __shared__ uint4 stage[];
        const int n_rows = c0 + kDownRows <= n_embd ? kDownRows : int(n_embd - c0);
        const uintptr_t a0 = reinterpret_cast<uintptr_t>(rows[0]), lead = a0 & 15;
        uint4* buf = stage + size_t(j) * down_stage_pieces(row_bytes);
        warp_stage(buf, reinterpret_cast<const uint4*>(a0 - lead), int((lead + n_rows * row_bytes + 15) / 16), lane);
        warp_stage_wait();
#pragma unroll
        for (int i = 0; i < kDownRows; ++i)
            rows[i] = reinterpret_cast<const uint8_t*>(buf) + lead + size_t(i < n_rows ? i : n_rows - 1) * row_bytes;
    }
    const float* xp = h + p * k;
    float acc[kDownRows];
#pragma unroll
    for (int i = 0; i < kDownRows; ++i) acc[i] = 0.0f;
    const int64_t n_steps = k / 256;
#pragma unroll 2
    for (int64_t s = 0; s < n_steps; ++s) dot_step<T, kDownRows>(rows, s, xp, lane, acc);
#pragma unroll
    for (int i = 0; i < kDownRows; ++i) {
        const float v = warp_sum(acc[i]);
        if (lane == 0) part[j][i] = v;
        if (lane == 0 && i == 0) factor[j] = wf;
    }
    __syncthreads();
    if (threadIdx.x < kDownRows && c0 + threadIdx.x < n_embd) {
        const int i = threadIdx.x;
        out[t * n_embd + c0 + i] =
            slot_sum([&](int jj) { return part[jj][i]; }, [&](int jj) { return factor[jj]; }, n_used);
    }
}

}  // namespace

void init_moe_decode_tables() { upload_decode_tables(); }

namespace {
// counts[e] += 1 for every chosen expert e < n_counts (a weight source's
// routing statistics; ids outside the range are not this block's).
__global__ void count_experts_kernel(const int32_t* __restrict__ experts, int64_t n_pairs, int32_t* counts,
                                     int64_t n_counts) {
    for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < n_pairs; p += int64_t(gridDim.x) * blockDim.x) {
        const int32_t e = experts[p];
        if (e >= 0 && e < n_counts) atomicAdd(counts + e, 1);
    }
}
}  // namespace

void count_experts(const int32_t* experts, int64_t n_pairs, int32_t* counts, int64_t n_counts, cudaStream_t stream) {
    if (n_pairs <= 0) return;
    const int threads = 256;
    const int blocks = int(std::min<int64_t>((n_pairs + threads - 1) / threads, 1024));
    count_experts_kernel<<<blocks, threads, 0, stream>>>(experts, n_pairs, counts, n_counts);
    check(cudaGetLastError(), "launching count_experts");
}

void route_topk(RouteScore kind, const float* logits, int64_t n_tok, int n_exp, int n_used, const float* bias,
                const int32_t* forced, const int32_t* forced_rows, bool norm, float w_scale, int32_t* experts,
                float* weights, cudaStream_t stream) {
    if (n_tok <= 0) return;
    if (n_used <= 0 || n_used > n_exp || n_used > 64)
        throw Error("CUDA routing supports 1 to 64 of the experts per token, not " + std::to_string(n_used) + " of " +
                    std::to_string(n_exp) + ".");
    if (!forced && n_used <= 32 && n_exp <= 256) {
#define DS4_ROUTE(SM, PER)                                                                                          \
    launch(route_warp_kernel<SM, PER>, unsigned(n_tok), 32, 0, stream, logits, n_exp, n_used, bias, norm, w_scale, \
           experts, weights)
        const bool sm = kind == RouteScore::Softmax;
        if (n_exp <= 128) {
            if (sm) DS4_ROUTE(true, 4);
            else DS4_ROUTE(false, 4);
        } else {
            if (sm) DS4_ROUTE(true, 8);
            else DS4_ROUTE(false, 8);
        }
#undef DS4_ROUTE
        check_launch("route_warp_kernel");
        return;
    }
    const size_t shmem = sizeof(float) * 2 * size_t(n_exp);
    if (kind == RouteScore::Softmax)
        launch(route_kernel<true>, unsigned(n_tok), kRouteThreads, shmem, stream, logits, n_exp, n_used, bias, forced,
                                                                              forced_rows, norm, w_scale, experts,
                                                                              weights);
    else
        launch(route_kernel<false>, unsigned(n_tok), kRouteThreads, shmem, stream, logits, n_exp, n_used, bias, forced,
                                                                               forced_rows, norm, w_scale, experts,
                                                                               weights);
    check_launch("route_kernel");
}

bool expert_matvec_supported(GgmlType type, int64_t k) {
    return quant_type_supported(type) && k % kChunk == 0 && k / kChunk <= INT32_MAX;
}

void expert_matvec(GgmlType type, const uint8_t* w, size_t matrix_bytes, size_t row_bytes, int64_t k, int64_t n_rows,
                   const int32_t* experts, int64_t n_pairs, int x_div, const float* x, int64_t ld_x, float* y,
                   int64_t ld_y, cudaStream_t stream) {
    if (n_pairs <= 0 || n_rows <= 0) return;
    if (n_pairs > 65535) throw Error("CUDA expert_matvec takes at most 65535 (token, expert) pairs.");
    const dim3 grid(blocks_for(n_rows, kWarps), unsigned(n_pairs));
    dispatch_type(type, [&](auto t) {
        constexpr GgmlType T = decltype(t)::value;
        // Every pair's activation row starts at x + i * ld_x: aligned when x is and ld_x % 4 == 0.
        if constexpr (kHasWarpDot<T>) {
            // Matrix e starts at w + e * matrix_bytes: aligned for the dot when matrices 0 and 1 are.
            if (warp_dot_usable(T, k, w, row_bytes, x, ld_x) && warp_dot_usable(T, k, w + matrix_bytes, row_bytes, x, ld_x)) {
                const dim3 row_grid{unsigned(n_rows), unsigned(n_pairs)};
                launch(expert_matvec_kernel<T, true>, row_grid, 32 * kRowWarps, 0, stream, w, matrix_bytes, row_bytes, k, n_rows,
                                                                             experts, x_div, x, ld_x, y, ld_y);
                return;
            }
        }
        launch(expert_matvec_kernel<T, false>, grid, 32 * kWarps, 0, stream, w, matrix_bytes, row_bytes, k, n_rows,
                                                                      experts, x_div, x, ld_x, y, ld_y);
    });
    check_launch("expert_matvec_kernel");
}

void expert_swiglu(const float* g, const float* u, const int32_t* experts, int64_t n_pairs, int64_t n_ff,
                   const float* gate_scale, int64_t n_gs, const float* up_scale, int64_t n_us, float limit, float* h,
                   cudaStream_t stream) {
    if (n_pairs <= 0 || n_ff <= 0) return;
    const dim3 grid(std::min<unsigned>(blocks_for(n_ff, 256), 64u), unsigned(std::min<int64_t>(n_pairs, 65535)));
    launch(expert_swiglu_kernel, grid, 256, 0, stream, g, u, experts, n_pairs, n_ff, gate_scale, n_gs, up_scale, n_us,
                                                   limit, h);
    check_launch("expert_swiglu_kernel");
}

void expert_combine(const float* d, const int32_t* experts, const float* weights,
                    const float* down_scale, int64_t n_ds, int64_t n_tok, int n_used, int64_t n_embd, float* out,
                    cudaStream_t stream) {
    if (n_tok <= 0 || n_embd <= 0) return;
    const dim3 grid(std::min<unsigned>(blocks_for(n_embd, 256), 64u), unsigned(std::min<int64_t>(n_tok, 65535)));
    launch(expert_combine_kernel, grid, 256, 0, stream, d, experts, weights, down_scale, n_ds, n_tok, n_used, n_embd,
                                                    out);
    check_launch("expert_combine_kernel");
}

bool expert_fused_supported(GgmlType gate_type, GgmlType up_type, GgmlType down_type, const void* gate,
                            const void* up, const void* down, size_t gu_matrix_bytes, size_t gu_row_bytes,
                            size_t d_matrix_bytes, size_t d_row_bytes, int64_t n_embd, int64_t n_ff, int n_used,
                            int64_t n_pairs, const float* x, int64_t ld_x) {
    if (!quant_type_supported(gate_type) || !quant_type_supported(down_type)) return false;
    bool dot_ok = false;
    dispatch_type(gate_type, [&](auto t) { dot_ok = kHasDotStep<decltype(t)::value>; });
    bool down_ok = false;
    dispatch_type(down_type, [&](auto t) { down_ok = kHasDotStep<decltype(t)::value>; });
    // Activations read as float4 from rows p * ld (x) and p * n_ff (h).
    const bool x_ok = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ld_x % 4 == 0 && n_ff % 4 == 0;
    return dot_ok && down_ok && gate_type == up_type && x_ok && n_used >= 1 && n_used <= kFusedMaxSlots &&
           n_pairs <= 65535 && dot_step_usable(gate_type, n_embd, gate, gu_matrix_bytes, gu_row_bytes) &&
           dot_step_usable(up_type, n_embd, up, gu_matrix_bytes, gu_row_bytes) &&
           dot_step_usable(down_type, n_ff, down, d_matrix_bytes, d_row_bytes);
}

void expert_gate_up_swiglu(GgmlType type, const uint8_t* gate, const uint8_t* up, size_t matrix_bytes,
                           size_t row_bytes, int64_t k, int64_t n_ff, const int32_t* experts, int64_t n_pairs,
                           int x_div, const float* x, int64_t ld_x, const float* gate_scale, int64_t n_gs,
                           const float* up_scale, int64_t n_us, float limit, float* h, cudaStream_t stream) {
    if (n_pairs <= 0 || n_ff <= 0) return;
    if (type == GgmlType::Q4_K && q4k_wide_usable(gate, up, matrix_bytes, row_bytes)) {
        const dim3 grid(blocks_for(n_ff, kWideWarps * kWideRows), unsigned(n_pairs));
        launch(expert_gate_up_q4k_wide_kernel, grid, 32 * kWideWarps, size_t(2 * kWideRows * kWideWarps) * row_bytes,
               stream, gate, up, matrix_bytes, row_bytes, k, n_ff, experts, x_div, x, ld_x, gate_scale, n_gs, up_scale,
               n_us, limit, h);
        check_launch("expert_gate_up_q4k_wide_kernel");
        return;
    }
    const dim3 grid(blocks_for(n_ff, kFusedWarps), unsigned(n_pairs));
    dispatch_type(type, [&](auto t) {
        constexpr GgmlType T = decltype(t)::value;
        if constexpr (kHasDotStep<T>) {
            const size_t shmem = stage_bytes(gate, up, matrix_bytes, row_bytes, 2 * kFusedWarps);
            if (shmem)
                launch(expert_gate_up_kernel<T, true>, grid, 32 * kFusedWarps, shmem, stream, 
                    gate, up, matrix_bytes, row_bytes, k, n_ff, experts, x_div, x, ld_x, gate_scale, n_gs, up_scale,
                    n_us, limit, h);
            else
                launch(expert_gate_up_kernel<T, false>, grid, 32 * kFusedWarps, 0, stream, 
                    gate, up, matrix_bytes, row_bytes, k, n_ff, experts, x_div, x, ld_x, gate_scale, n_gs, up_scale,
                    n_us, limit, h);
        } else
            throw Error("expert_gate_up_swiglu: no fused kernel for this type.");
    });
    check_launch("expert_gate_up_kernel");
}

void expert_down_combine(GgmlType type, const uint8_t* down, size_t matrix_bytes, size_t row_bytes, int64_t n_ff,
                         int64_t n_embd, const int32_t* experts, const float* weights, const float* down_scale,
                         int64_t n_ds, int64_t n_tok, int n_used, const float* h, float* out, cudaStream_t stream) {
    if (n_tok <= 0 || n_embd <= 0) return;
    const dim3 grid(unsigned((n_embd + kDownRows - 1) / kDownRows), unsigned(n_tok));
    dispatch_type(type, [&](auto t) {
        constexpr GgmlType T = decltype(t)::value;
        if constexpr (kHasDotStep<T>) {
            const size_t shmem = down_stage_bytes(down, matrix_bytes, row_bytes, n_used);
            if (shmem)
                launch(expert_down_combine_kernel<T, true>, grid, 32 * n_used, shmem, stream, 
                    down, matrix_bytes, row_bytes, n_ff, n_embd, experts, weights, down_scale, n_ds, n_used, h, out);
            else
                launch(expert_down_combine_kernel<T, false>, grid, 32 * n_used, 0, stream, 
                    down, matrix_bytes, row_bytes, n_ff, n_embd, experts, weights, down_scale, n_ds, n_used, h, out);
        } else
            throw Error("expert_down_combine: no fused kernel for this type.");
    });
    check_launch("expert_down_combine_kernel");
}

}  // namespace ds4::cuda

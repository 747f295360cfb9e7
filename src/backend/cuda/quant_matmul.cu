// Dense weight products on the device: a matrix-vector kernel that decodes
// on the fly (decode, few tokens) and a row decoder that feeds cuBLAS
// (prefill) and get_rows. The block decoders are in quant_decode.cuh.
#include <cstdlib>

#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/env_switch.h"
#include "backend/cuda/quant_decode.cuh"
#include "backend/cuda/route_warp.cuh"
#include "backend/cuda/warp_dot.cuh"

namespace ds4::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

// A block works on matrix blockIdx.y of a grouped product (MatvecGroups).
template <class W, class X, class Y>
__device__ __forceinline__ void to_group(const MatvecGroups& g, W& w, X& x, Y& y) {
    w += g.w_stride * blockIdx.y;
    x += g.x_stride * blockIdx.y;
    y += g.y_stride * blockIdx.y;
}

// One warp per weight row; every lane decodes a strided slice of the row once
// and uses it for all tokens (NT >= n_tok, a compile-time bound for registers).
template <GgmlType T, int NT>
__global__ void matvec_kernel(const uint8_t* w, size_t row_bytes, int64_t k, int64_t n_rows, const float* x,
                              int64_t ld_x, int n_tok, float* y, int64_t ld_y, MatvecGroups g) {
    to_group(g, w, x, y);
    wait_for_inputs();
    const int lane = threadIdx.x & 31;
    const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
    if (r >= n_rows) return;
    const uint8_t* row = w + size_t(r) * row_bytes;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
    for (int64_t i = lane; i < k; i += 32) {
        const float wv = decode<T>(row, i);
#pragma unroll
        for (int t = 0; t < NT; ++t)
            if (t < n_tok) acc[t] += wv * x[t * ld_x + i];
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        float s = acc[t];
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0 && t < n_tok) y[t * ld_y + r] = s;
    }
}

// Elements per block and bytes per block of each type (quant/block_layouts.h).

// v2 decode matvec (rows of k % 32 == 0): each lane decodes whole 32-element
// chunks (lane_dot); a row is shared by LPR lanes (32: a warp a row), so a
// warp takes 32 / LPR rows. v1 issued one dependent load per element per
// lane and was memory-latency bound (~1.7% of HBM bandwidth end to end). A
// warp a row left most lanes idle on short rows: GLM-5's per-head wk_b
// (Q4_0, 6 chunks a row) ran at 113 GB/s (ncu, H200, 2026-12-04).
template <GgmlType T, int NT, int LPR>
__global__ void matvec_chunk_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t k, int64_t n_rows,
                                    const float* __restrict__ x, int64_t ld_x, int n_tok, float* __restrict__ y,
                                    int64_t ld_y, MatvecGroups g) {
    to_group(g, w, x, y);
    wait_for_inputs();
    const int lane = threadIdx.x & 31;
    const int64_t r =
        (int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5)) * (32 / LPR) + lane / LPR;
    // Every lane takes part in the shuffles; a row past the end computes row 0 and is not stored.
    float acc[NT];
    lane_dot<T, NT, LPR>(w + size_t(r < n_rows ? r : 0) * row_bytes, k, x, ld_x, n_tok, lane % LPR, acc);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        float s = acc[t];
#pragma unroll
        for (int off = LPR / 2; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane % LPR == 0 && r < n_rows && t < n_tok) y[t * ld_y + r] = s;
    }
}
// Lanes a row of n_chunks chunks takes: the power of two that holds them, 4 to 32.
int chunk_lanes(int64_t n_chunks) {
    int l = 4;
    while (l < 32 && l < n_chunks) l *= 2;
    return l;
}

// Decode matvec for the types with a coalesced warp dot: one row per block
// of kRowWarps warps (block_row_dot), or kMatvecRows<T, NT> consecutive rows
// sharing the activation loads (block_rows_dot): with 8 tokens a row's
// step reads 8 KiB of activations from L1 for 144-210 bytes of weights, and
// the 151,936-row Q6_K output head ran at 0.64 TB/s on them (ncu, H200,
// 2026-12-02). Either way a row's sum is the same expression.
template <GgmlType T, int NT>
constexpr int kMatvecRows = kHasRowsDot<T> && NT > 1 ? 2 : 1;

template <GgmlType T, int NT, int NR = kMatvecRows<T, NT>>
__device__ __forceinline__ void matvec_warp_body(const uint8_t* __restrict__ w, size_t row_bytes, int64_t k,
                                                 int64_t n_rows, const float* __restrict__ x, int64_t ld_x, int n_tok,
                                                 float* __restrict__ y, int64_t ld_y) {
    const int64_t r0 = int64_t(blockIdx.x) * NR;
    const int n_here = n_rows - r0 < NR ? int(n_rows - r0) : NR;
    // The rows on their way to L2 while the kernel before finishes (weights
    // do not change during a step).
    prefetch_l2(w + size_t(r0) * row_bytes, row_bytes * size_t(n_here), int(threadIdx.x));
    wait_for_inputs();
    // Tokens in tiles of NT: the rows come from memory once, later tiles find
    // them in L1. A token's sum does not depend on the tile it is in.
    for (int t0 = 0; t0 < n_tok; t0 += NT) {
        const int nt = n_tok - t0 < NT ? n_tok - t0 : NT;
        const float* xt = x + int64_t(t0) * ld_x;
        float acc[NR][NT];
        if constexpr (NR == 1) {
            // A full tile passes the constant NT: the per-token bounds checks of
            // the activation loads fold away (the arithmetic is the same).
            if (nt == NT) block_row_dot<T, NT>(w + size_t(r0) * row_bytes, k, xt, ld_x, NT, acc[0]);
            else block_row_dot<T, NT>(w + size_t(r0) * row_bytes, k, xt, ld_x, nt, acc[0]);
        } else {
            const uint8_t* rows[NR];
#pragma unroll
            for (int i = 0; i < NR; ++i)  // past the end: the last row again, not stored
                rows[i] = w + size_t(r0 + (i < n_here ? i : n_here - 1)) * row_bytes;
            if (nt == NT) block_rows_dot<T, NT, NR>(rows, k, xt, ld_x, NT, acc);
            else block_rows_dot<T, NT, NR>(rows, k, xt, ld_x, nt, acc);
        }
        if (threadIdx.x == 0) {
#pragma unroll
            for (int i = 0; i < NR; ++i)
#pragma unroll
                for (int t = 0; t < NT; ++t)
                    if (i < n_here && t < nt) y[int64_t(t0 + t) * ld_y + r0 + i] = acc[i][t];
        }
        __syncthreads();  // the partial sums are rewritten by the next tile
    }
}

template <GgmlType T, int NT, int NR = kMatvecRows<T, NT>>
__global__ void matvec_warp_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t k, int64_t n_rows,
                                   const float* __restrict__ x, int64_t ld_x, int n_tok, float* __restrict__ y,
                                   int64_t ld_y, MatvecGroups g) {
    to_group(g, w, x, y);
    matvec_warp_body<T, NT, NR>(w, row_bytes, k, n_rows, x, ld_x, n_tok, y, ld_y);
}

// Rows a block of the one-token Q4_K / Q6_K matvec takes. One row a block
// gave each warp a step or two of a short row and a grid of a block a row:
// Qwen3's 2,048-wide Q4_K projections took 6.5 us a call, a block's start
// and reduction for ~1 KB of weights (ncu, H200, 2026-12-04). With four,
// each warp has four rows' steps in flight; a row's sum is the same
// expression (block_rows_dot), so results do not change. Few rows keep one
// a block, so that the grid still covers the SMs. DS4_CUDA_MATVEC_NR=1/2/4
// forces one (A/B). Read once.
int one_token_rows(int64_t n_rows) {
    static const int forced = [] {
        const long long n = env_int("DS4_CUDA_MATVEC_NR", 0);
        return n == 1 || n == 2 || n == 4 ? int(n) : 0;
    }();
    if (forced) return forced;
    return n_rows >= 2048 ? 4 : 1;
}
// The 8-token tile under __launch_bounds__(block, MB): registers left for MB
// blocks per SM (MB = 1: the block size alone, which lets ptxas take 255).
// Unbounded, the Q4_K tile takes 195 registers (12.5 % occupancy, H200 ncu,
// 2026-12-03); with MB = 4 (128 registers) an 8-sequence decode step went
// 699 -> 733 t/s, 32 sequences 910 -> 948 (MB = 3: 713 / 928; MB = 1: 685 /
// 897; bench/logs/2026-12-03-h200-bounds). DS4_CUDA_MATVEC_MB (0, 1, 3, 4;
// default 4) picks the variant, 0 the unbounded matvec_warp_kernel.
template <GgmlType T, int MB>
__global__ void __launch_bounds__(32 * kRowWarps, MB)
    matvec_warp_bounded_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t k, int64_t n_rows,
                               const float* __restrict__ x, int64_t ld_x, int n_tok, float* __restrict__ y,
                               int64_t ld_y, MatvecGroups g) {
    to_group(g, w, x, y);
    matvec_warp_body<T, 8>(w, row_bytes, k, n_rows, x, ld_x, n_tok, y, ld_y);
}

// DS4_CUDA_MATVEC_MB: 1, 3 or 4 (the default) runs the 8-token tile of the
// Q4_K / Q6_K matvec on matvec_warp_bounded_kernel<T, MB>; 0 on
// matvec_warp_kernel, unbounded. Read once.
int matvec_min_blocks() {
    static const int mb = [] {
        const long long n = env_int("DS4_CUDA_MATVEC_MB", 4);
        return n == 0 || n == 1 || n == 3 ? int(n) : 4;
    }();
    return mb;
}

// Decode matvec for the types whose coalesced dot is warp_dot.cuh's
// 256-element step and nothing else (Q2_K, Q3_K, IQ2_XXS): a block of
// kRowWarps warps in groups of n_parts warps, each group kStepRows rows and
// each warp of a group every n_parts-th step of them, summed through shared
// memory; up to NT tokens share each decoded weight, more in tiles of NT.
// n_parts (1, 2 or 4) follows the row length (step_parts): a short row
// split four ways left blocks of 2 steps a warp whose start and reduction
// cost more than their loads. The element decoder these types fell back to
// read GLM-5's Q2_K / Q3_K projections at 65-86 GB/s (H200, 2026-12-04).
// DS4_CUDA_STEP_ROWS (2 or 4 rows a group, default 2) and DS4_CUDA_STEP_UNROLL
// (steps a warp unrolls, 2 or 4, default 4): how many bytes a warp keeps in
// flight. H200, GLM-5 q2 8 blocks, tg128 @ 512 (device time per replayed
// step): rows 2 / unroll 2 6.32 ms, 4 / 2 6.63, 2 / 4 5.75, 4 / 4 6.13
// (bench/logs/2026-12-04c-h200). Read once.
std::pair<int, int> step_shape() {
    static const std::pair<int, int> v{env_int("DS4_CUDA_STEP_ROWS", 2) == 4 ? 4 : 2,
                                       env_int("DS4_CUDA_STEP_UNROLL", 4) == 2 ? 2 : 4};
    return v;
}
template <GgmlType T>
constexpr bool kStepMatvec = kHasDotStep<T> && !kHasWarpDot<T>;
int step_parts(int64_t n_steps) { return n_steps >= 32 ? 4 : n_steps >= 16 ? 2 : 1; }

template <GgmlType T, int NT, int kStepRows, int kUnroll>
__global__ void __launch_bounds__(32 * kRowWarps)
    matvec_step_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t k, int64_t n_rows,
                       const float* __restrict__ x, int64_t ld_x, int n_tok, float* __restrict__ y, int64_t ld_y,
                       int n_parts, MatvecGroups g) {
    __shared__ float partial[kRowWarps][kStepRows][NT];
    to_group(g, w, x, y);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int group = warp / n_parts, part = warp % n_parts;
    const int64_t r0 = (int64_t(blockIdx.x) * (kRowWarps / n_parts) + group) * kStepRows;
    const int n_here = r0 >= n_rows ? 0 : n_rows - r0 < kStepRows ? int(n_rows - r0) : kStepRows;
    if (part == 0 && n_here > 0) prefetch_l2(w + size_t(r0) * row_bytes, row_bytes * size_t(n_here), lane);
    wait_for_inputs();
    const uint8_t* rows[kStepRows];
#pragma unroll
    for (int i = 0; i < kStepRows; ++i)  // past the end: the last row again (or row 0), not stored
        rows[i] = w + size_t(n_here == 0 ? 0 : r0 + (i < n_here ? i : n_here - 1)) * row_bytes;
    const int64_t n_steps = n_here > 0 ? k / 256 : 0;
    for (int t0 = 0; t0 < n_tok; t0 += NT) {
        const int nt = n_tok - t0 < NT ? n_tok - t0 : NT;
        const float* xs[NT];
#pragma unroll
        for (int t = 0; t < NT; ++t) xs[t] = x + int64_t(t0 + (t < nt ? t : 0)) * ld_x;  // spare slots: token t0 again
        float acc[kStepRows][NT];
#pragma unroll
        for (int i = 0; i < kStepRows; ++i)
#pragma unroll
            for (int t = 0; t < NT; ++t) acc[i][t] = 0.0f;
#pragma unroll kUnroll
        for (int64_t s = part; s < n_steps; s += n_parts) dot_step_n<T, kStepRows, NT>(rows, s, xs, lane, acc);
#pragma unroll
        for (int i = 0; i < kStepRows; ++i)
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                const float v = warp_sum(acc[i][t]);
                if (lane == 0) partial[warp][i][t] = v;
            }
        __syncthreads();
        if (part == 0 && lane < kStepRows * NT) {
            const int i = lane / NT, t = lane % NT;
            if (i < n_here && t < nt) {
                float v = 0.0f;
                for (int wi = warp; wi < warp + n_parts; ++wi) v += partial[wi][i][t];
                y[int64_t(t0 + t) * ld_y + r0 + i] = v;
            }
        }
        __syncthreads();  // the partial sums are rewritten by the next tile
    }
}

// dst row (i * n_rows + r) = row r of matrix matrices[i] (grid y: rows, z: matrices).
template <GgmlType T>
__global__ void dequantize_matrices_kernel(const uint8_t* w, size_t matrix_bytes, size_t row_bytes, int64_t k,
                                           int64_t n_rows, const int32_t* matrices, float* dst) {
    const int64_t r = blockIdx.y, i = blockIdx.z;
    const uint8_t* row = w + size_t(matrices[i]) * matrix_bytes + size_t(r) * row_bytes;
    float* out = dst + (i * n_rows + r) * k;
    for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < k; j += int64_t(gridDim.x) * blockDim.x)
        out[j] = decode<T>(row, j);
}

template <GgmlType T>
__global__ void dequantize_kernel(const uint8_t* w, size_t row_bytes, int64_t k, int64_t n_rows, const int32_t* ids,
                                  float* dst, int64_t ld_dst) {
    const int64_t r = blockIdx.y;
    if (r >= n_rows) return;
    const uint8_t* row = w + size_t(ids ? ids[r] : r) * row_bytes;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < k; i += int64_t(gridDim.x) * blockDim.x)
        dst[r * ld_dst + i] = decode<T>(row, i);
}

// Calls f(std::integral_constant<GgmlType, T>) for the runtime type.

}  // namespace

void init_quant_tables() {
    upload_decode_tables();
    init_moe_decode_tables();
    init_moe_grouped_tables();
    init_mma_gemm_tables();
}

bool quant_type_supported(GgmlType type) {
    try {
        dispatch_type(type, [](auto) {});
        return true;
    } catch (const Error&) {
        return false;
    }
}

void dequantize_rows(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t k, int64_t n_rows,
                     const int32_t* ids, float* dst, int64_t ld_dst, cudaStream_t stream) {
    if (n_rows <= 0 || k <= 0) return;
    dispatch_type(type, [&](auto t) {
        for (int64_t r0 = 0; r0 < n_rows; r0 += 65535) {  // gridDim.y limit
            const int64_t n = std::min<int64_t>(65535, n_rows - r0);
            const dim3 grid(std::min<unsigned>(blocks_for(k, 256), 64u), unsigned(n));
            dequantize_kernel<decltype(t)::value><<<grid, 256, 0, stream>>>(
                ids ? w : w + size_t(r0) * row_bytes, row_bytes, k, n, ids ? ids + r0 : nullptr, dst + r0 * ld_dst,
                ld_dst);
        }
        check_launch("dequantize_kernel");
    });
}

void dequantize_matrices(GgmlType type, const uint8_t* w, size_t matrix_bytes, size_t row_bytes, int64_t k,
                         int64_t n_rows, const int32_t* matrices, int64_t n_matrices, float* dst, cudaStream_t stream) {
    if (n_matrices <= 0 || n_rows <= 0 || k <= 0) return;
    if (n_rows > 65535 || n_matrices > 65535)
        throw Error("CUDA dequantize_matrices: at most 65535 rows and 65535 matrices per call.");
    dispatch_type(type, [&](auto t) {
        const dim3 grid(std::min<unsigned>(blocks_for(k, 256), 16u), unsigned(n_rows), unsigned(n_matrices));
        dequantize_matrices_kernel<decltype(t)::value><<<grid, 256, 0, stream>>>(w, matrix_bytes, row_bytes, k, n_rows,
                                                                                  matrices, dst);
    });
    check_launch("dequantize_matrices_kernel");
}

namespace {
// A router's F32 product and its softmax top-k in one launch: each block its
// row of logits (matvec_warp_body, the matvec's sums), then the last block
// to finish routes every token, a warp a token (route_warp_row, the bits of
// route_warp_kernel). The separate routing launch cost ~3 us of a ~70 us
// Qwen3 decode layer. counter: zero before the launch and after it (the last
// block resets it), so a recorded step replays.
template <int NT, int kPer>
__global__ void router_topk_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t k, int64_t n_exp,
                                   const float* __restrict__ x, int64_t ld_x, int n_tok, float* logits, int n_used,
                                   bool norm, float w_scale, int32_t* experts, float* weights, unsigned* counter) {
    matvec_warp_body<GgmlType::F32, NT>(w, row_bytes, k, n_exp, x, ld_x, n_tok, logits, n_exp);
    __shared__ bool last;
    __threadfence();  // this block's logits before its count
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int t = int(threadIdx.x >> 5); t < n_tok; t += int(blockDim.x >> 5))
        route_warp_row<true, kPer>(logits + int64_t(t) * n_exp, int(n_exp), n_used, nullptr, norm, w_scale,
                                   experts + int64_t(t) * n_used, weights + int64_t(t) * n_used);
    if (threadIdx.x == 0) *counter = 0u;
}
}  // namespace

bool router_topk_supported(const uint8_t* w, size_t row_bytes, int64_t k, int64_t n_exp, const float* x, int64_t ld_x,
                           int64_t n_tok, int n_used) {
    return n_tok >= 1 && n_tok <= 4 && n_exp >= 1 && n_exp <= 256 && n_used >= 1 && n_used <= 32 && n_used <= n_exp &&
           warp_dot_usable(GgmlType::F32, k, w, row_bytes, x, ld_x);
}

void router_topk(const uint8_t* w, size_t row_bytes, int64_t k, int64_t n_exp, const float* x, int64_t ld_x,
                 int64_t n_tok, float* logits, int n_used, bool norm, float w_scale, int32_t* experts, float* weights,
                 unsigned* counter, cudaStream_t stream) {
    if (!router_topk_supported(w, row_bytes, k, n_exp, x, ld_x, n_tok, n_used))
        throw Error("router_topk: a shape it does not take (ask router_topk_supported first).");
    static_assert(kMatvecRows<GgmlType::F32, 4> == 1, "a block a row of logits");
    const int nt = int(n_tok);
#define DS4_ROUTER(NT, PER)                                                                                            \
    launch(router_topk_kernel<NT, PER>, unsigned(n_exp), 32 * kRowWarps, 0, stream, w, row_bytes, k, n_exp, x, ld_x, nt, \
           logits, n_used, norm, w_scale, experts, weights, counter)
    // The matvec's token tiles (1, 2, 4): a token's sums do not depend on the tile.
    if (n_exp <= 128) {
        if (nt == 1) DS4_ROUTER(1, 4);
        else if (nt == 2) DS4_ROUTER(2, 4);
        else DS4_ROUTER(4, 4);
    } else {
        if (nt == 1) DS4_ROUTER(1, 8);
        else if (nt == 2) DS4_ROUTER(2, 8);
        else DS4_ROUTER(4, 8);
    }
#undef DS4_ROUTER
    check_launch("router_topk_kernel");
}

void matvec(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t k, int64_t n_rows, const float* x,
            int64_t ld_x, int64_t n_tok, float* y, int64_t ld_y, cudaStream_t stream, const MatvecGroups& groups) {
    if (n_tok <= 0 || n_rows <= 0 || groups.count <= 0) return;
    if (n_tok > kMatvecMaxTokens)
        throw Error("CUDA matvec called with " + std::to_string(n_tok) + " tokens, more than " +
                    std::to_string(kMatvecMaxTokens) + ".");
    if (groups.count > 65535) throw Error("CUDA matvec: at most 65535 matrices per call.");
    const unsigned G = unsigned(groups.count);
    // The coalesced kernels' alignment, which the first matrix's checks
    // below establish, holds for every matrix when the strides keep it.
    const bool groups_aligned = G == 1 || (groups.w_stride % 16 == 0 && groups.x_stride % 4 == 0);
    const MatvecGroups& g = groups;
    const dim3 grid(blocks_for(n_rows, kWarpsPerBlock), G);
    dispatch_type(type, [&](auto t) {
        constexpr GgmlType T = decltype(t)::value;
        const int nt = int(n_tok);
        if constexpr (kHasWarpDot<T>) {
            if (groups_aligned && warp_dot_usable(T, k, w, row_bytes, x, ld_x)) {
#define DS4_WARP(NT)                                                                                                  \
    launch(matvec_warp_kernel<T, NT>, dim3(unsigned((n_rows + kMatvecRows<T, NT> - 1) / kMatvecRows<T, NT>), G),      \
           32 * kRowWarps, 0, stream, w, row_bytes, k, n_rows, x, ld_x, nt, y, ld_y, g)
#define DS4_WARP_MB(MB)                                                                                               \
    launch(matvec_warp_bounded_kernel<T, MB>, dim3(unsigned((n_rows + kMatvecRows<T, 8> - 1) / kMatvecRows<T, 8>), G), \
           32 * kRowWarps, 0, stream, w, row_bytes, k, n_rows, x, ld_x, nt, y, ld_y, g)
                if (nt == 1) {
                    if constexpr (kHasRowsDot<T>) {
                        const int nr = one_token_rows(n_rows);
                        if (nr > 1) {
                            const dim3 blocks(unsigned((n_rows + nr - 1) / nr), G);
                            if (nr == 4)
                                launch(matvec_warp_kernel<T, 1, 4>, blocks, 32 * kRowWarps, 0, stream, w, row_bytes, k,
                                       n_rows, x, ld_x, nt, y, ld_y, g);
                            else
                                launch(matvec_warp_kernel<T, 1, 2>, blocks, 32 * kRowWarps, 0, stream, w, row_bytes, k,
                                       n_rows, x, ld_x, nt, y, ld_y, g);
                            check_launch("matvec_warp_kernel");
                            return;
                        }
                    }
                    DS4_WARP(1);
                } else if (nt == 2) DS4_WARP(2);
                else if (nt <= 4) DS4_WARP(4);
                else if constexpr (kHasRowsDot<T>) {
                    const int mb = matvec_min_blocks();
                    if (mb == 1) DS4_WARP_MB(1);
                    else if (mb == 3) DS4_WARP_MB(3);
                    else if (mb == 4) DS4_WARP_MB(4);
                    else DS4_WARP(8);
                } else DS4_WARP(8);
#undef DS4_WARP_MB
#undef DS4_WARP
                check_launch("matvec_warp_kernel");
                return;
            }
        }
        if constexpr (kStepMatvec<T>) {
            if (groups_aligned && dot_step_usable(T, k, w, 0, row_bytes) && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                ld_x % 4 == 0) {
                const int parts = step_parts(k / 256);
                const auto [step_rows, unroll] = step_shape();
                const int64_t rows_per_block = int64_t(kRowWarps / parts) * step_rows;
                const dim3 blocks(unsigned((n_rows + rows_per_block - 1) / rows_per_block), G);
#define DS4_STEP_RU(NT, R, U) \
    launch(matvec_step_kernel<T, NT, R, U>, blocks, 32 * kRowWarps, 0, stream, w, row_bytes, k, n_rows, x, ld_x, nt, \
           y, ld_y, parts, g)
#define DS4_STEP(NT)                                               \
    do {                                                           \
        if (step_rows == 4 && unroll == 4) DS4_STEP_RU(NT, 4, 4);  \
        else if (step_rows == 4) DS4_STEP_RU(NT, 4, 2);            \
        else if (unroll == 4) DS4_STEP_RU(NT, 2, 4);               \
        else DS4_STEP_RU(NT, 2, 2);                                \
    } while (0)
                if (nt == 1) DS4_STEP(1);
                else if (nt == 2) DS4_STEP(2);
                else if (nt <= 4) DS4_STEP(4);
                else DS4_STEP(8);
#undef DS4_STEP
#undef DS4_STEP_RU
                check_launch("matvec_step_kernel");
                return;
            }
        }
        if (nt > kMatvecTile) {  // the kernels below take one tile of tokens per launch
            for (int t0 = 0; t0 < nt; t0 += int(kMatvecTile))
                matvec(type, w, row_bytes, k, n_rows, x + int64_t(t0) * ld_x, ld_x,
                       std::min<int64_t>(kMatvecTile, nt - t0), y + int64_t(t0) * ld_y, ld_y, stream, g);
            return;
        }
#define DS4_TILE(KERNEL)                                                                                        \
    do {                                                                                                        \
        if (nt == 1) launch(KERNEL<T, 1>, grid, 32 * kWarpsPerBlock, 0, stream, w, row_bytes, k, n_rows, x, ld_x, nt, y, ld_y, g); \
        else if (nt == 2) launch(KERNEL<T, 2>, grid, 32 * kWarpsPerBlock, 0, stream, w, row_bytes, k, n_rows, x, ld_x, nt, y, ld_y, g); \
        else if (nt <= 4) launch(KERNEL<T, 4>, grid, 32 * kWarpsPerBlock, 0, stream, w, row_bytes, k, n_rows, x, ld_x, nt, y, ld_y, g); \
        else launch(KERNEL<T, 8>, grid, 32 * kWarpsPerBlock, 0, stream, w, row_bytes, k, n_rows, x, ld_x, nt, y, ld_y, g); \
        check_launch(#KERNEL);                                                                                  \
    } while (0)
        if (k % kChunk == 0 && k / kChunk <= INT32_MAX) {
            // Rows per warp 32 / LPR; the grid shrinks with it.
            const int lpr = chunk_lanes(k / kChunk);
            const int64_t rows_per_block = int64_t(kWarpsPerBlock) * (32 / lpr);
            const dim3 cgrid(unsigned((n_rows + rows_per_block - 1) / rows_per_block), G);
#define DS4_CHUNK(NT, LPR) \
    launch(matvec_chunk_kernel<T, NT, LPR>, cgrid, 32 * kWarpsPerBlock, 0, stream, w, row_bytes, k, n_rows, x, ld_x, nt, y, ld_y, g)
#define DS4_CHUNK_NT(LPR)                   \
    do {                                    \
        if (nt == 1) DS4_CHUNK(1, LPR);     \
        else if (nt == 2) DS4_CHUNK(2, LPR); \
        else if (nt <= 4) DS4_CHUNK(4, LPR); \
        else DS4_CHUNK(8, LPR);             \
    } while (0)
            if (lpr == 32) DS4_CHUNK_NT(32);
            else if (lpr == 16) DS4_CHUNK_NT(16);
            else if (lpr == 8) DS4_CHUNK_NT(8);
            else DS4_CHUNK_NT(4);
#undef DS4_CHUNK_NT
#undef DS4_CHUNK
            check_launch("matvec_chunk_kernel");
        } else {
            DS4_TILE(matvec_kernel);
        }
#undef DS4_TILE
    });
}

}  // namespace ds4::cuda

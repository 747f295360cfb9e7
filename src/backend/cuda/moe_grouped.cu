// The routed-expert FFN for a decode batch of several sequences, grouped by
// expert on the device. The fused kernels (moe_decode.cu) give every (token,
// slot) pair its own blocks, so an expert that k of the batch's tokens chose
// is read k times and each 256-element step of its rows decoded k times.
// Here block column g serves one expert and every pair routed to it
// (moe_groups.cuh: expert g itself once there are as many pairs as
// experts): its warps read their expert rows once and decode each step once
// for up to four of those pairs (dot_step_n). The grouping is read from the
// routing on the device, so the step can still be recorded as a CUDA graph.
//
// A pair's products are the fused kernels' expressions (the same dot_step_n
// code, the same epilogue), and the down products are combined by
// expert_combine in slot order as expert_down_combine does: the results equal
// the fused path's bit for bit, whichever sequences share the step.
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/moe_epilogue.cuh"
#include "backend/cuda/moe_groups.cuh"
#include "backend/cuda/q4k_wide_dot.cuh"
#include "backend/cuda/quant_decode.cuh"
#include "backend/cuda/warp_dot.cuh"

namespace ds4::cuda {
namespace {

constexpr int kGroupWarps = 4;
constexpr int kGroupDownRows = 2;           // down rows per warp, sharing the activation loads

// h[p][r] = SwiGLU(gate_e[r] . x[p / x_div], up_e[r] . x[p / x_div]) for the
// pairs p of the block's expert e; warp w takes row blockIdx.x * kGroupWarps + w.
template <GgmlType T, bool kStage>
__global__ void __launch_bounds__(32 * kGroupWarps)
    expert_gate_up_grouped_kernel(const uint8_t* __restrict__ gw, const uint8_t* __restrict__ uw,
                                  size_t matrix_bytes, size_t row_bytes, int64_t k, int64_t n_ff,
                                  const int32_t* __restrict__ experts, int n_pairs, int n_exp, int x_div,
                                  const float* __restrict__ x, int64_t ld_x, const float* gs, int64_t n_gs,
                                  const float* us, int64_t n_us, float limit, float* __restrict__ h) {
    wait_for_inputs();
    __shared__ int list[kGroupMaxPairs];
    int e;
    const int n = expert_group(experts, n_pairs, n_exp, int(blockIdx.y), list, e);
    const int lane = threadIdx.x & 31;
    const int64_t r = int64_t(blockIdx.x) * kGroupWarps + (threadIdx.x >> 5);
    if (n == 0 || r >= n_ff) return;
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
    const int64_t n_steps = k / 256;
    pair_tiles(n, [&](auto tile, int a0) {
        constexpr int NA = decltype(tile)::value;
        const float* xs[NA];
#pragma unroll
        for (int a = 0; a < NA; ++a) xs[a] = x + int64_t(list[a0 + a] / x_div) * ld_x;
        float acc[2][NA];
#pragma unroll
        for (int a = 0; a < NA; ++a) acc[0][a] = acc[1][a] = 0.0f;
#pragma unroll 2
        for (int64_t s = 0; s < n_steps; ++s) dot_step_n<T, 2, NA>(rows, s, xs, lane, acc);
#pragma unroll
        for (int a = 0; a < NA; ++a) {
            const float gv = warp_sum(acc[0][a]), uv = warp_sum(acc[1][a]);
            if (lane == 0)
                h[int64_t(list[a0 + a]) * n_ff + r] = expert_swiglu_value(gv, uv, e, gs, n_gs, us, n_us, limit);
        }
    });
}

// expert_gate_up_grouped_kernel for Q4_K rows, four row indices a warp
// (q4k_wide_dot.cuh, as expert_gate_up_q4k_wide_kernel per pair): warp w
// takes rows (blockIdx.x * kWideWarps + w) * 4 and the three after it, for
// the pairs of the block's expert two at a time.
__global__ void __launch_bounds__(32 * kWideWarps)
    expert_gate_up_grouped_q4k_wide_kernel(const uint8_t* __restrict__ gw, const uint8_t* __restrict__ uw,
                                           size_t matrix_bytes, size_t row_bytes, int64_t k, int64_t n_ff,
                                           const int32_t* __restrict__ experts, int n_pairs, int n_exp, int x_div,
                                           const float* __restrict__ x, int64_t ld_x, const float* gs, int64_t n_gs,
                                           const float* us, int64_t n_us, float limit, float* __restrict__ h) {
    wait_for_inputs();
    __shared__ int list[kGroupMaxPairs];
    int e;
    const int n = expert_group(experts, n_pairs, n_exp, int(blockIdx.y), list, e);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t r0 = (int64_t(blockIdx.x) * kWideWarps + warp) * kWideRows;
    if (n == 0 || r0 >= n_ff) return;
    const int n_here = n_ff - r0 < kWideRows ? int(n_ff - r0) : kWideRows;
    extern __shared__ uint4 stage[];
    const int n16 = int(row_bytes / 16);
    const uint8_t *gate, *up;
    q4k_wide_stage(stage + size_t(warp) * 2 * kWideRows * n16, gw, uw, size_t(e) * matrix_bytes + size_t(r0) * row_bytes,
                   n16, n_here, lane, gate, up);
    const int g = lane >> 3;
    const int64_t n_steps = k / 256;
    pair_tiles2(n, [&](auto tile, int a0) {
        constexpr int NA = decltype(tile)::value;
        const float* xs[NA];
#pragma unroll
        for (int a = 0; a < NA; ++a) xs[a] = x + int64_t(list[a0 + a] / x_div) * ld_x;
        float acc[2][NA];
#pragma unroll
        for (int a = 0; a < NA; ++a) acc[0][a] = acc[1][a] = 0.0f;
#pragma unroll 2
        for (int64_t s = 0; s < n_steps; ++s) q4k_gate_up_wide_step<NA>(gate, up, s, xs, lane & 7, acc);
#pragma unroll
        for (int a = 0; a < NA; ++a) {
            const float gv = row8_sum(acc[0][a]), uv = row8_sum(acc[1][a]);
            if ((lane & 7) == 0 && g < n_here)
                h[int64_t(list[a0 + a]) * n_ff + r0 + g] = expert_swiglu_value(gv, uv, e, gs, n_gs, us, n_us, limit);
        }
    });
}

// d[p][c] = down_e[c] . h[p] for the pairs p of the block's expert e; warp w
// takes rows c0 .. c0 + kGroupDownRows - 1, c0 = (blockIdx.x * kGroupWarps + w) * kGroupDownRows.
template <GgmlType T, bool kStage>
__global__ void __launch_bounds__(32 * kGroupWarps)
    expert_down_grouped_kernel(const uint8_t* __restrict__ dw, size_t matrix_bytes, size_t row_bytes, int64_t k,
                               int64_t n_embd, const int32_t* __restrict__ experts, int n_pairs, int n_exp,
                               const float* __restrict__ h, float* __restrict__ d) {
    wait_for_inputs();
    __shared__ int list[kGroupMaxPairs];
    int e;
    const int n = expert_group(experts, n_pairs, n_exp, int(blockIdx.y), list, e);
    const int lane = threadIdx.x & 31;
    const int64_t c0 = (int64_t(blockIdx.x) * kGroupWarps + (threadIdx.x >> 5)) * kGroupDownRows;
    if (n == 0 || c0 >= n_embd) return;
    const int n_rows = c0 + kGroupDownRows <= n_embd ? kGroupDownRows : int(n_embd - c0);
    const uint8_t* rows[kGroupDownRows];
#pragma unroll
    for (int i = 0; i < kGroupDownRows; ++i)  // a row past the end repeats the last one; its sum is not stored
        rows[i] = dw + size_t(e) * matrix_bytes + size_t(c0 + (i < n_rows ? i : n_rows - 1)) * row_bytes;
    if constexpr (kStage) {  // the warp's rows are consecutive: one copy
        extern __shared__ uint4 stage[];
        const int n16 = int(row_bytes / 16);
        uint4* buf = stage + size_t(threadIdx.x >> 5) * kGroupDownRows * n16;
        warp_stage(buf, reinterpret_cast<const uint4*>(rows[0]), n16 * n_rows, lane);
        warp_stage_wait();
#pragma unroll
        for (int i = 0; i < kGroupDownRows; ++i)
            rows[i] = reinterpret_cast<const uint8_t*>(buf + (i < n_rows ? i : n_rows - 1) * n16);
    }
    const int64_t n_steps = k / 256;
    pair_tiles(n, [&](auto tile, int a0) {
        constexpr int NA = decltype(tile)::value;
        const float* xs[NA];
#pragma unroll
        for (int a = 0; a < NA; ++a) xs[a] = h + int64_t(list[a0 + a]) * k;
        float acc[kGroupDownRows][NA];
#pragma unroll
        for (int i = 0; i < kGroupDownRows; ++i)
#pragma unroll
            for (int a = 0; a < NA; ++a) acc[i][a] = 0.0f;
#pragma unroll 2
        for (int64_t s = 0; s < n_steps; ++s) dot_step_n<T, kGroupDownRows, NA>(rows, s, xs, lane, acc);
#pragma unroll
        for (int i = 0; i < kGroupDownRows; ++i)
#pragma unroll
            for (int a = 0; a < NA; ++a) {
                const float v = warp_sum(acc[i][a]);
                if (lane == 0 && i < n_rows) d[int64_t(list[a0 + a]) * n_embd + c0 + i] = v;
            }
    });
}

}  // namespace

// The IQ2_XXS codebook is a per-file device symbol (quant_decode.cuh): this
// file's copy needs its own upload.
void init_moe_grouped_tables() { upload_decode_tables(); }

bool expert_grouped_supported(int64_t n_exp, int64_t n_pairs) { return groups_fit(n_exp, n_pairs); }

void expert_gate_up_swiglu_grouped(GgmlType type, const uint8_t* gate, const uint8_t* up, size_t matrix_bytes,
                                   size_t row_bytes, int64_t k, int64_t n_ff, int64_t n_exp, const int32_t* experts,
                                   int64_t n_pairs, int x_div, const float* x, int64_t ld_x, const float* gate_scale,
                                   int64_t n_gs, const float* up_scale, int64_t n_us, float limit, float* h,
                                   cudaStream_t stream) {
    if (n_pairs <= 0 || n_ff <= 0) return;
    if (!expert_grouped_supported(n_exp, n_pairs))
        throw Error("expert_gate_up_swiglu_grouped: " + std::to_string(n_pairs) + " pairs over " +
                    std::to_string(n_exp) + " experts is beyond the grouped kernels.");
    const int np = int(n_pairs);
    if (type == GgmlType::Q4_K && q4k_wide_usable(gate, up, matrix_bytes, row_bytes)) {
        const dim3 grid(blocks_for(n_ff, kWideWarps * kWideRows), group_columns(n_pairs, n_exp));
        launch(expert_gate_up_grouped_q4k_wide_kernel, grid, 32 * kWideWarps,
               size_t(2 * kWideRows * kWideWarps) * row_bytes, stream, gate, up, matrix_bytes, row_bytes, k, n_ff,
               experts, np, int(n_exp), x_div, x, ld_x, gate_scale, n_gs, up_scale, n_us, limit, h);
        check_launch("expert_gate_up_grouped_q4k_wide_kernel");
        return;
    }
    const dim3 grid(blocks_for(n_ff, kGroupWarps), group_columns(n_pairs, n_exp));
    dispatch_type(type, [&](auto t) {
        constexpr GgmlType T = decltype(t)::value;
        if constexpr (kHasDotStep<T>) {
            const size_t shmem = stage_bytes(gate, up, matrix_bytes, row_bytes, 2 * kGroupWarps);
            if (shmem)
                launch(expert_gate_up_grouped_kernel<T, true>, grid, 32 * kGroupWarps, shmem, stream, gate, up,
                       matrix_bytes, row_bytes, k, n_ff, experts, np, int(n_exp), x_div, x, ld_x, gate_scale, n_gs, up_scale, n_us,
                       limit, h);
            else
                launch(expert_gate_up_grouped_kernel<T, false>, grid, 32 * kGroupWarps, 0, stream, gate, up,
                       matrix_bytes, row_bytes, k, n_ff, experts, np, int(n_exp), x_div, x, ld_x, gate_scale, n_gs, up_scale, n_us,
                       limit, h);
        } else
            throw Error("expert_gate_up_swiglu_grouped: no kernel for this type.");
    });
    check_launch("expert_gate_up_grouped_kernel");
}

void expert_down_grouped(GgmlType type, const uint8_t* down, size_t matrix_bytes, size_t row_bytes, int64_t n_ff,
                         int64_t n_embd, int64_t n_exp, const int32_t* experts, int64_t n_pairs, const float* h,
                         float* d, cudaStream_t stream) {
    if (n_pairs <= 0 || n_embd <= 0) return;
    if (!expert_grouped_supported(n_exp, n_pairs))
        throw Error("expert_down_grouped: " + std::to_string(n_pairs) + " pairs over " + std::to_string(n_exp) +
                    " experts is beyond the grouped kernels.");
    const dim3 grid(blocks_for(n_embd, kGroupWarps * kGroupDownRows), group_columns(n_pairs, n_exp));
    const int np = int(n_pairs);
    dispatch_type(type, [&](auto t) {
        constexpr GgmlType T = decltype(t)::value;
        if constexpr (kHasDotStep<T>) {
            const size_t shmem =
                stage_bytes(down, down, matrix_bytes, row_bytes, size_t(kGroupDownRows) * kGroupWarps);
            if (shmem)
                launch(expert_down_grouped_kernel<T, true>, grid, 32 * kGroupWarps, shmem, stream, down, matrix_bytes,
                       row_bytes, n_ff, n_embd, experts, np, int(n_exp), h, d);
            else
                launch(expert_down_grouped_kernel<T, false>, grid, 32 * kGroupWarps, 0, stream, down, matrix_bytes,
                       row_bytes, n_ff, n_embd, experts, np, int(n_exp), h, d);
        } else
            throw Error("expert_down_grouped: no kernel for this type.");
    });
    check_launch("expert_down_grouped_kernel");
}

}  // namespace ds4::cuda

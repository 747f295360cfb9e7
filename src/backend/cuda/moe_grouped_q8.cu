// The routed-expert FFN for a decode batch on int8 activations, grouped by
// expert (moe_groups.cuh) as moe_grouped.cu does on float ones: each chosen
// expert's rows are read once and each super-block decoded once for up to
// four of its pairs (q8_row_dot takes several activation rows). A pair's
// products and epilogue are those of the per-pair int8 kernels
// (q8_matvec.cu), and expert_combine sums the slots in their order, so every
// token gets what it gets decoded alone, bit for bit.
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/moe_epilogue.cuh"
#include "backend/cuda/moe_groups.cuh"
#include "backend/cuda/q8_dot.cuh"

namespace ds4::cuda {
namespace {

constexpr int kQ8GroupWarps = 4;
constexpr int kQ8GroupDownRows = 2;  // as the per-pair kernel's kDownRowsQ8

// h[p][r] = SwiGLU(gate_e[r] . x'[p / x_div], up_e[r] . x'[p / x_div]) for the
// pairs p of the block's expert e; warp w takes row blockIdx.x * kQ8GroupWarps + w.
template <GgmlType T>
__global__ void __launch_bounds__(32 * kQ8GroupWarps)
    expert_gate_up_grouped_q8_kernel(const uint8_t* __restrict__ gw, const uint8_t* __restrict__ uw,
                                     size_t matrix_bytes, size_t row_bytes, int64_t k, int64_t n_ff,
                                     const int32_t* __restrict__ experts, int n_pairs, int n_exp, int x_div,
                                     const int8_t* __restrict__ xq, const float* gs, int64_t n_gs, const float* us,
                                     int64_t n_us, float limit, float* __restrict__ h) {
    wait_for_inputs();
    __shared__ int list[kGroupMaxPairs];
    int e;
    const int n = expert_group(experts, n_pairs, n_exp, int(blockIdx.y), list, e);
    const int lane = threadIdx.x & 31;
    const int64_t r = int64_t(blockIdx.x) * kQ8GroupWarps + (threadIdx.x >> 5);
    if (n == 0 || r >= n_ff) return;
    const size_t off = size_t(e) * matrix_bytes + size_t(r) * row_bytes;
    const uint8_t* rows[2] = {gw + off, uw + off};
    pair_tiles(n, [&](auto tile, int a0) {
        constexpr int NA = decltype(tile)::value;
        const int8_t* aq[NA];
        const float* ad[NA];
#pragma unroll
        for (int a = 0; a < NA; ++a) {
            aq[a] = xq + int64_t(list[a0 + a] / x_div) * q8_row_bytes(k);
            ad[a] = reinterpret_cast<const float*>(aq[a] + k);
        }
        float acc[2][NA] = {};
        q8_row_dot<T, 2, NA>(rows, k / 256, aq, ad, NA, lane, acc);
#pragma unroll
        for (int a = 0; a < NA; ++a) {
            const float gv = warp_sum(acc[0][a]), uv = warp_sum(acc[1][a]);
            if (lane == 0)
                h[int64_t(list[a0 + a]) * n_ff + r] = expert_swiglu_value(gv, uv, e, gs, n_gs, us, n_us, limit);
        }
    });
}

// d[p][c] = down_e[c] . h'[p] for the pairs p of the block's expert e; warp w
// takes rows c0, c0 + 1, c0 = (blockIdx.x * kQ8GroupWarps + w) * kQ8GroupDownRows.
template <GgmlType T>
__global__ void __launch_bounds__(32 * kQ8GroupWarps)
    expert_down_grouped_q8_kernel(const uint8_t* __restrict__ dw, size_t matrix_bytes, size_t row_bytes, int64_t k,
                                  int64_t n_embd, const int32_t* __restrict__ experts, int n_pairs, int n_exp,
                                  const int8_t* __restrict__ hq, float* __restrict__ d) {
    wait_for_inputs();
    __shared__ int list[kGroupMaxPairs];
    int e;
    const int n = expert_group(experts, n_pairs, n_exp, int(blockIdx.y), list, e);
    const int lane = threadIdx.x & 31;
    const int64_t c0 = (int64_t(blockIdx.x) * kQ8GroupWarps + (threadIdx.x >> 5)) * kQ8GroupDownRows;
    if (n == 0 || c0 >= n_embd) return;
    const uint8_t* rows[kQ8GroupDownRows];
#pragma unroll
    for (int i = 0; i < kQ8GroupDownRows; ++i)  // a row past the end repeats the last one; its sum is not stored
        rows[i] = dw + size_t(e) * matrix_bytes + size_t(c0 + i < n_embd ? c0 + i : n_embd - 1) * row_bytes;
    pair_tiles(n, [&](auto tile, int a0) {
        constexpr int NA = decltype(tile)::value;
        const int8_t* aq[NA];
        const float* ad[NA];
#pragma unroll
        for (int a = 0; a < NA; ++a) {
            aq[a] = hq + int64_t(list[a0 + a]) * q8_row_bytes(k);
            ad[a] = reinterpret_cast<const float*>(aq[a] + k);
        }
        float acc[kQ8GroupDownRows][NA] = {};
        q8_row_dot<T, kQ8GroupDownRows, NA>(rows, k / 256, aq, ad, NA, lane, acc);
#pragma unroll
        for (int i = 0; i < kQ8GroupDownRows; ++i)
#pragma unroll
            for (int a = 0; a < NA; ++a) {
                const float v = warp_sum(acc[i][a]);
                if (lane == 0 && c0 + i < n_embd) d[int64_t(list[a0 + a]) * n_embd + c0 + i] = v;
            }
    });
}

}  // namespace

void expert_gate_up_swiglu_grouped_q8(GgmlType type, const uint8_t* gate, const uint8_t* up, size_t matrix_bytes,
                                      size_t row_bytes, int64_t k, int64_t n_ff, int64_t n_exp,
                                      const int32_t* experts, int64_t n_pairs, int x_div, const int8_t* xq,
                                      const float* gate_scale, int64_t n_gs, const float* up_scale, int64_t n_us,
                                      float limit, float* h, cudaStream_t stream) {
    if (n_pairs <= 0 || n_ff <= 0) return;
    if (!groups_fit(n_exp, n_pairs))
        throw Error("expert_gate_up_swiglu_grouped_q8: " + std::to_string(n_pairs) + " pairs over " +
                    std::to_string(n_exp) + " experts is beyond the grouped kernels.");
    const dim3 grid(blocks_for(n_ff, kQ8GroupWarps), group_columns(n_pairs, n_exp));
    dispatch_q8(type, [&](auto t) {
        launch(expert_gate_up_grouped_q8_kernel<decltype(t)::value>, grid, 32 * kQ8GroupWarps, 0, stream, gate, up,
               matrix_bytes, row_bytes, k, n_ff, experts, int(n_pairs), int(n_exp), x_div, xq, gate_scale, n_gs,
               up_scale, n_us, limit, h);
    });
    check_launch("expert_gate_up_grouped_q8_kernel");
}

void expert_down_grouped_q8(GgmlType type, const uint8_t* down, size_t matrix_bytes, size_t row_bytes, int64_t n_ff,
                            int64_t n_embd, int64_t n_exp, const int32_t* experts, int64_t n_pairs, const int8_t* hq,
                            float* d, cudaStream_t stream) {
    if (n_pairs <= 0 || n_embd <= 0) return;
    if (!groups_fit(n_exp, n_pairs))
        throw Error("expert_down_grouped_q8: " + std::to_string(n_pairs) + " pairs over " + std::to_string(n_exp) +
                    " experts is beyond the grouped kernels.");
    const dim3 grid(blocks_for(n_embd, kQ8GroupWarps * kQ8GroupDownRows), group_columns(n_pairs, n_exp));
    dispatch_q8(type, [&](auto t) {
        launch(expert_down_grouped_q8_kernel<decltype(t)::value>, grid, 32 * kQ8GroupWarps, 0, stream, down,
               matrix_bytes, row_bytes, n_ff, n_embd, experts, int(n_pairs), int(n_exp), hq, d);
    });
    check_launch("expert_down_grouped_q8_kernel");
}

}  // namespace ds4::cuda

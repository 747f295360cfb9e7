// The routed-expert decode pair on split activations (split_digits.h): x
// split once per layer, gate + up + SwiGLU (Q4_K rows), h split, down +
// weighted combine (Q4_K rows; Q6_K downs take the float kernel on h).
// Float-grade products at __dp4a cost, for every decode batch size the
// per-pair path takes, so a token's output does not depend on its batch.
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/moe_epilogue.cuh"
#include "backend/cuda/split_dot.cuh"

namespace ds4::cuda {
namespace {

// The wide lane layout (q4k_wide_dot.cuh): kWideRows row indices a warp
// (lane >> 3), kWideWarps warps a gate+up block.
constexpr int kSplitMaxSlots = 16;  // warps per down block: one per slot

// Row r of x (k values) into out + r * split_row_bytes(k): one block per row.
__global__ void quantize_rows_split_kernel(const float* __restrict__ x, int64_t ld_x, int64_t k,
                                           int8_t* __restrict__ out) {
    wait_for_inputs();
    int8_t* row = out + int64_t(blockIdx.x) * split_row_bytes(k);
    const float* xr = x + int64_t(blockIdx.x) * ld_x;
    const int64_t chunks = k / 8;
    for (int64_t c0 = 0; c0 < chunks; c0 += blockDim.x)
        split_chunk8(xr, k, c0 + threadIdx.x, c0 + threadIdx.x < chunks, row);
}

// h[p][r] = SwiGLU(gate_e[r] . x'[p / x_div], up_e[r] . x'[p / x_div]),
// e = experts[p]: warp w of block x takes rows (x * kWideWarps + w) * 4
// and the three after it, eight lanes a row, of pair blockIdx.y.
template <int MB>
__global__ void __launch_bounds__(32 * kWideWarps, MB)
    expert_gate_up_q4k_split_kernel(const uint8_t* __restrict__ gw, const uint8_t* __restrict__ uw,
                                    size_t matrix_bytes, size_t row_bytes, int64_t k, int64_t n_ff,
                                    const int32_t* __restrict__ experts, int x_div, const int8_t* __restrict__ xs,
                                    const float* gs, int64_t n_gs, const float* us, int64_t n_us, float limit,
                                    float* __restrict__ h) {
    wait_for_inputs();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 3;
    const int64_t r0 = (int64_t(blockIdx.x) * kWideWarps + warp) * kWideRows;
    const int64_t p = blockIdx.y;
    if (r0 >= n_ff) return;
    const int64_t r = r0 + g < n_ff ? r0 + g : n_ff - 1;  // past the end: the last row again, not stored
    const int64_t e = experts[p];
    const size_t off = size_t(e) * matrix_bytes + size_t(r) * row_bytes;
    const uint8_t* const rows[2] = {gw + off, uw + off};
    const SplitRow x = split_row(xs + (p / x_div) * split_row_bytes(k), k);
    float acc[2] = {0.0f, 0.0f};
    const int64_t n_steps = k / 256;
#pragma unroll 2
    for (int64_t s = 0; s < n_steps; ++s) q4k_split_step<2>(rows, s, x, lane & 7, acc);
    const float gv = row8_sum(acc[0]), uv = row8_sum(acc[1]);
    if ((lane & 7) == 0 && r0 + g < n_ff)
        h[p * n_ff + r0 + g] = expert_swiglu_value(gv, uv, e, gs, n_gs, us, n_us, limit);
}

// out[t][c] = sum over slots j in order of (down_e[c] . h'[p]) * (w[p] * ds[e]),
// p = t * n_used + j: one block per kWideRows output rows of a token, warp j
// taking slot j (eight lanes a row); the slot sums meet in shared memory and
// are added in slot order (expert_combine_kernel's expression).
template <int MB>
__global__ void __launch_bounds__(32 * kSplitMaxSlots, MB)
    expert_down_combine_q4k_split_kernel(const uint8_t* __restrict__ dw, size_t matrix_bytes, size_t row_bytes, int64_t k,
                                     int64_t n_embd, const int32_t* __restrict__ experts,
                                     const float* __restrict__ weights, const float* ds, int64_t n_ds, int n_used,
                                     const int8_t* __restrict__ hs, float* __restrict__ out) {
    wait_for_inputs();
    __shared__ float part[kSplitMaxSlots][kWideRows];
    __shared__ float factor[kSplitMaxSlots];
    const int lane = threadIdx.x & 31, j = threadIdx.x >> 5, g = lane >> 3;
    const int64_t t = blockIdx.y, c0 = int64_t(blockIdx.x) * kWideRows;
    const int64_t p = t * n_used + j;
    const int64_t e = experts[p];
    const float wf = slot_factor(p, e, weights, ds, n_ds);  // stored with the dot, below
    const int64_t c = c0 + g < n_embd ? c0 + g : n_embd - 1;
    const uint8_t* const rows[1] = {dw + size_t(e) * matrix_bytes + size_t(c) * row_bytes};
    const SplitRow x = split_row(hs + p * split_row_bytes(k), k);
    float acc[1] = {0.0f};
    const int64_t n_steps = k / 256;
#pragma unroll 3
    for (int64_t s = 0; s < n_steps; ++s) q4k_split_step<1>(rows, s, x, lane & 7, acc);
    const float v = row8_sum(acc[0]);
    if ((lane & 7) == 0) part[j][g] = v;
    if (lane == 0) factor[j] = wf;
    __syncthreads();
    if (threadIdx.x < kWideRows && c0 + threadIdx.x < n_embd) {
        const int i = threadIdx.x;
        out[t * n_embd + c0 + i] =
            slot_sum([&](int jj) { return part[jj][i]; }, [&](int jj) { return factor[jj]; }, n_used);
    }
}

// DS4_CUDA_SPLIT_MB="G,D": the blocks per SM the compiler must leave
// registers for in the gate+up (G: 1, 8 or 10) and down (D: 1 or 2)
// kernels; 0: no such bound, the compiler's own choice (1 is not the same:
// it lets ptxas take ~130 registers). Default "0,2": unbounded the down
// kernel took 84 registers (25 % occupancy); with D = 2 (64) an 8-sequence
// decode step went 699 -> 733 t/s, 32 sequences 910 -> 963, while G = 8
// changed nothing and G = 10 spilled (538 / 668; H200, 2026-12-03,
// bench/logs/2026-12-03-h200-bounds). Read once.
std::pair<int, int> split_min_blocks() {
    static const std::pair<int, int> mb = [] {
        const char* v = std::getenv("DS4_CUDA_SPLIT_MB");
        int g = 0, d = 2;
        if (v && std::sscanf(v, "%d,%d", &g, &d) != 2) g = 0, d = 2;
        return std::pair<int, int>{g == 1 || g == 8 || g == 10 ? g : 0, d == 1 || d == 2 ? d : 0};
    }();
    return mb;
}

// Q4_K rows at base + m * matrix_bytes + r * row_bytes readable by q4k_split_step (16-byte loads).
bool split_rows_usable(GgmlType type, int64_t k, const void* base, size_t matrix_bytes, size_t row_bytes) {
    return type == GgmlType::Q4_K && q4k_wide_rows_aligned(k, base, matrix_bytes, row_bytes);
}

}  // namespace

int64_t split_activation_bytes(int64_t k) { return split_row_bytes(k); }

void quantize_rows_split(const float* x, int64_t ld_x, int64_t n_rows, int64_t k, int8_t* out, cudaStream_t stream) {
    if (n_rows <= 0) return;
    if (n_rows > INT32_MAX || k % 256 != 0) throw Error("quantize_rows_split: rows of whole 256-value blocks only.");
    launch(quantize_rows_split_kernel, unsigned(n_rows), 128, 0, stream, x, ld_x, k, out);
    check_launch("quantize_rows_split_kernel");
}

bool expert_split_gate_up_supported(GgmlType gate_type, GgmlType up_type, const void* gate, const void* up,
                                    size_t matrix_bytes, size_t row_bytes, int64_t n_embd, int64_t n_pairs,
                                    const float* x, int64_t ld_x) {
    const bool x_ok = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ld_x % 4 == 0;  // float4 loads of every token's row
    return x_ok && n_pairs >= 1 && n_pairs <= 65535 && split_rows_usable(gate_type, n_embd, gate, matrix_bytes, row_bytes) &&
           split_rows_usable(up_type, n_embd, up, matrix_bytes, row_bytes);
}

bool expert_split_down_supported(GgmlType type, const void* down, size_t matrix_bytes, size_t row_bytes, int64_t n_ff,
                                 int n_used) {
    return n_used >= 1 && n_used <= kSplitMaxSlots && split_rows_usable(type, n_ff, down, matrix_bytes, row_bytes);
}

void expert_gate_up_swiglu_split(const uint8_t* gate, const uint8_t* up, size_t matrix_bytes, size_t row_bytes,
                                 int64_t k, int64_t n_ff, const int32_t* experts, int64_t n_pairs, int x_div,
                                 const int8_t* xs, const float* gate_scale, int64_t n_gs, const float* up_scale,
                                 int64_t n_us, float limit, float* h, cudaStream_t stream) {
    if (n_pairs <= 0 || n_ff <= 0) return;
    const dim3 grid(unsigned((n_ff + kWideWarps * kWideRows - 1) / (kWideWarps * kWideRows)),
                    unsigned(n_pairs));
    auto go = [&](auto kernel) {
        launch(kernel, grid, 32 * kWideWarps, 0, stream, gate, up, matrix_bytes, row_bytes, k, n_ff, experts, x_div,
               xs, gate_scale, n_gs, up_scale, n_us, limit, h);
    };
    const int mb = split_min_blocks().first;
    if (mb == 1) go(expert_gate_up_q4k_split_kernel<1>);
    else if (mb == 8) go(expert_gate_up_q4k_split_kernel<8>);
    else if (mb == 10) go(expert_gate_up_q4k_split_kernel<10>);
    else go(expert_gate_up_q4k_split_kernel<0>);
    check_launch("expert_gate_up_q4k_split_kernel");
}

void expert_down_combine_split(const uint8_t* down, size_t matrix_bytes, size_t row_bytes, int64_t n_ff,
                               int64_t n_embd, const int32_t* experts, const float* weights, const float* down_scale,
                               int64_t n_ds, int64_t n_tok, int n_used, const int8_t* hs, float* out,
                               cudaStream_t stream) {
    if (n_tok <= 0 || n_embd <= 0) return;
    const dim3 grid(unsigned((n_embd + kWideRows - 1) / kWideRows), unsigned(n_tok));
    auto go = [&](auto kernel) {
        launch(kernel, grid, 32 * n_used, 0, stream, down, matrix_bytes, row_bytes, n_ff, n_embd, experts, weights,
               down_scale, n_ds, n_used, hs, out);
    };
    const int mb = split_min_blocks().second;
    if (mb == 1) go(expert_down_combine_q4k_split_kernel<1>);
    else if (mb == 2) go(expert_down_combine_q4k_split_kernel<2>);
    else go(expert_down_combine_q4k_split_kernel<0>);
    check_launch("expert_down_combine_q4k_split_kernel");
}

}  // namespace ds4::cuda

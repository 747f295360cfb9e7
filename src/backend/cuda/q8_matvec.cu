// Decode products on int8 activations (q8_dot.cuh): the dense matvec, which
// quantizes its input in shared memory (no extra launch; each block covers
// kQ8RowsPerBlock rows, so the quantization is a small share of its work),
// and the routed-expert pair of the fused MoE decode (gate + up + SwiGLU,
// down + weighted combine), which read activations quantized once per
// layer by quantize_rows_q8 (one row per token, one per (token, slot)
// pair), since an expert block covers too few rows to quantize its own.
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/moe_epilogue.cuh"
#include "backend/cuda/q8_dot.cuh"

namespace ds4::cuda {
namespace {

constexpr int kQ8Warps = 4;
constexpr int kQ8RowsPerWarp = 2;  // rows sharing each activation load
constexpr int kQ8RowsPerBlock = kQ8Warps * kQ8RowsPerWarp;

// y[t][r] = W[r] . x'[t]: a block quantizes the n_tok activation rows into
// shared memory, then each warp takes kQ8RowsPerWarp rows.
template <GgmlType T, int NT>
__global__ void __launch_bounds__(32 * kQ8Warps)
    matvec_q8_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t k, int64_t n_rows,
                     const float* __restrict__ x, int64_t ld_x, int n_tok, float* __restrict__ y, int64_t ld_y) {
    extern __shared__ __align__(16) int8_t smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    {
        // The warp's rows are adjacent: on their way to L2 while the kernel
        // before finishes and x is quantized.
        const int64_t r0 = int64_t(blockIdx.x) * kQ8RowsPerBlock + warp * kQ8RowsPerWarp;
        if (r0 < n_rows)
            prefetch_l2(w + size_t(r0) * row_bytes, size_t(n_rows - r0 < kQ8RowsPerWarp ? n_rows - r0 : kQ8RowsPerWarp) * row_bytes, lane);
    }
    wait_for_inputs();
    const int8_t* xq[NT];
    const float* xd[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        int8_t* q = smem + t * q8_row_bytes(k);
        float* d = reinterpret_cast<float*>(q + k);
        if (t < n_tok) quantize_row_block(x + t * ld_x, k, q, d, threadIdx.x, 32 * kQ8Warps);
        xq[t] = q;
        xd[t] = d;
    }
    __syncthreads();
    const int64_t r0 = int64_t(blockIdx.x) * kQ8RowsPerBlock + warp * kQ8RowsPerWarp;
    if (r0 >= n_rows) return;
    const uint8_t* rows[kQ8RowsPerWarp];
#pragma unroll
    for (int i = 0; i < kQ8RowsPerWarp; ++i)  // a row past the end repeats the last; its sum is not stored
        rows[i] = w + size_t(r0 + i < n_rows ? r0 + i : n_rows - 1) * row_bytes;
    float acc[kQ8RowsPerWarp][NT] = {};
    q8_row_dot<T, kQ8RowsPerWarp, NT>(rows, k / 256, xq, xd, n_tok, lane, acc);
#pragma unroll
    for (int i = 0; i < kQ8RowsPerWarp; ++i)
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const float s = warp_sum(acc[i][t]);
            if (lane == 0 && t < n_tok && r0 + i < n_rows) y[t * ld_y + r0 + i] = s;
        }
}

// Row r of x (k values) into out + r * q8_row_bytes(k): one block per row.
__global__ void quantize_rows_q8_kernel(const float* __restrict__ x, int64_t ld_x, int64_t k, int8_t* __restrict__ out) {
    wait_for_inputs();
    int8_t* q = out + int64_t(blockIdx.x) * q8_row_bytes(k);
    quantize_row_block(x + int64_t(blockIdx.x) * ld_x, k, q, reinterpret_cast<float*>(q + k), threadIdx.x, blockDim.x);
}

// h[p][r] = SwiGLU(gate_e[r] . x'[p / x_div], up_e[r] . x'[p / x_div]): one warp per
// (row, pair), as expert_gate_up_kernel (moe_decode.cu), with its epilogue.
template <GgmlType T>
__global__ void __launch_bounds__(32 * kQ8Warps)
    expert_gate_up_q8_kernel(const uint8_t* __restrict__ gw, const uint8_t* __restrict__ uw, size_t matrix_bytes,
                             size_t row_bytes, int64_t k, int64_t n_ff, const int32_t* __restrict__ experts, int x_div,
                             const int8_t* __restrict__ xq, const float* gs, int64_t n_gs, const float* us,
                             int64_t n_us, float limit, float* __restrict__ h) {
    wait_for_inputs();
    const int lane = threadIdx.x & 31;
    const int64_t r = int64_t(blockIdx.x) * kQ8Warps + (threadIdx.x >> 5);
    const int64_t p = blockIdx.y;
    if (r >= n_ff) return;
    const int64_t e = experts[p];
    const size_t off = size_t(e) * matrix_bytes + size_t(r) * row_bytes;
    const uint8_t* rows[2] = {gw + off, uw + off};
    const int8_t* q = xq + (p / x_div) * q8_row_bytes(k);
    const int8_t* const aq[1] = {q};
    const float* const ad[1] = {reinterpret_cast<const float*>(q + k)};
    float acc[2][1] = {};
    q8_row_dot<T, 2, 1>(rows, k / 256, aq, ad, 1, lane, acc);
    const float gv = warp_sum(acc[0][0]), uv = warp_sum(acc[1][0]);
    if (lane == 0) h[p * n_ff + r] = expert_swiglu_value(gv, uv, e, gs, n_gs, us, n_us, limit);
}

// out[t][c] = sum over slots j in order of (down_e[c] . h'[p]) * (w[p] * ds[e]):
// one block per kDownRowsQ8 output rows of a token, warp j taking slot j,
// as expert_down_combine_kernel (moe_decode.cu).
constexpr int kDownRowsQ8 = 2;
constexpr int kMaxSlotsQ8 = 16;
template <GgmlType T>
__global__ void __launch_bounds__(32 * kMaxSlotsQ8)
    expert_down_combine_q8_kernel(const uint8_t* __restrict__ dw, size_t matrix_bytes, size_t row_bytes, int64_t k,
                                  int64_t n_embd, const int32_t* __restrict__ experts,
                                  const float* __restrict__ weights, const float* ds, int64_t n_ds, int n_used,
                                  const int8_t* __restrict__ hq, float* __restrict__ out) {
    wait_for_inputs();
    __shared__ float part[kMaxSlotsQ8][kDownRowsQ8];
    __shared__ float factor[kMaxSlotsQ8];
    const int lane = threadIdx.x & 31, j = threadIdx.x >> 5;
    const int64_t t = blockIdx.y, c0 = int64_t(blockIdx.x) * kDownRowsQ8;
    const int64_t p = t * n_used + j;
    const int64_t e = experts[p];
    const float wf = slot_factor(p, e, weights, ds, n_ds);  // stored with the dot, below
    const uint8_t* rows[kDownRowsQ8];
#pragma unroll
    for (int i = 0; i < kDownRowsQ8; ++i)
        rows[i] = dw + size_t(e) * matrix_bytes + size_t(c0 + i < n_embd ? c0 + i : n_embd - 1) * row_bytes;
    const int8_t* q = hq + p * q8_row_bytes(k);
    const int8_t* const aq[1] = {q};
    const float* const ad[1] = {reinterpret_cast<const float*>(q + k)};
    float acc[kDownRowsQ8][1] = {};
    q8_row_dot<T, kDownRowsQ8, 1>(rows, k / 256, aq, ad, 1, lane, acc);
#pragma unroll
    for (int i = 0; i < kDownRowsQ8; ++i) {
        const float v = warp_sum(acc[i][0]);
        if (lane == 0) part[j][i] = v;
        if (lane == 0 && i == 0) factor[j] = wf;
    }
    __syncthreads();
    if (threadIdx.x < kDownRowsQ8 && c0 + threadIdx.x < n_embd) {
        const int i = threadIdx.x;
        out[t * n_embd + c0 + i] =
            slot_sum([&](int jj) { return part[jj][i]; }, [&](int jj) { return factor[jj]; }, n_used);
    }
}

// Shared memory of the dense kernel: NT quantized rows.
size_t matvec_q8_smem(int64_t k, int nt) { return size_t(nt) * size_t(q8_row_bytes(k)); }

}  // namespace

int64_t q8_activation_bytes(int64_t k) { return q8_row_bytes(k); }

bool matvec_q8_supported(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t k, const float* x, int64_t ld_x,
                         int64_t n_tok) {
    const int nt = n_tok <= 1 ? 1 : n_tok <= 2 ? 2 : n_tok <= 4 ? 4 : int(kMatvecTile);
    return n_tok >= 1 && n_tok <= kMatvecMaxTokens && q8_dot_usable(type, k, w, 0, row_bytes) &&
           reinterpret_cast<uintptr_t>(x) % 16 == 0 && ld_x % 4 == 0 && matvec_q8_smem(k, nt) <= 48 * 1024;
}

void matvec_q8(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t k, int64_t n_rows, const float* x,
               int64_t ld_x, int64_t n_tok, float* y, int64_t ld_y, cudaStream_t stream) {
    if (n_tok <= 0 || n_rows <= 0) return;
    if (n_tok > kMatvecTile) {  // a block quantizes one tile of tokens into shared memory: one launch per tile
        for (int64_t t0 = 0; t0 < n_tok; t0 += kMatvecTile)
            matvec_q8(type, w, row_bytes, k, n_rows, x + t0 * ld_x, ld_x, std::min(kMatvecTile, n_tok - t0),
                      y + t0 * ld_y, ld_y, stream);
        return;
    }
    const unsigned grid = unsigned((n_rows + kQ8RowsPerBlock - 1) / kQ8RowsPerBlock);
    const int nt = int(n_tok);
    dispatch_q8(type, [&](auto t) {
        constexpr GgmlType T = decltype(t)::value;
#define DS4_Q8(NT) \
    launch(matvec_q8_kernel<T, NT>, grid, 32 * kQ8Warps, matvec_q8_smem(k, NT), stream, w, row_bytes, k, n_rows, x, ld_x, nt, y, ld_y)
        if (nt == 1) DS4_Q8(1);
        else if (nt == 2) DS4_Q8(2);
        else if (nt <= 4) DS4_Q8(4);
        else DS4_Q8(8);
#undef DS4_Q8
    });
    check_launch("matvec_q8_kernel");
}

void quantize_rows_q8(const float* x, int64_t ld_x, int64_t n_rows, int64_t k, int8_t* out, cudaStream_t stream) {
    if (n_rows <= 0) return;
    if (n_rows > INT32_MAX) throw Error("quantize_rows_q8: too many rows.");
    launch(quantize_rows_q8_kernel, unsigned(n_rows), 128, 0, stream, x, ld_x, k, out);
    check_launch("quantize_rows_q8_kernel");
}

bool expert_q8_supported(GgmlType gate_type, GgmlType up_type, GgmlType down_type, const void* gate, const void* up,
                         const void* down, size_t gu_matrix_bytes, size_t gu_row_bytes, size_t d_matrix_bytes,
                         size_t d_row_bytes, int64_t n_embd, int64_t n_ff, int n_used, int64_t n_pairs,
                         const float* x, int64_t ld_x) {
    const bool x_ok = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ld_x % 4 == 0;
    return x_ok && gate_type == up_type && n_used >= 1 && n_used <= kMaxSlotsQ8 && n_pairs <= 65535 &&
           q8_dot_usable(gate_type, n_embd, gate, gu_matrix_bytes, gu_row_bytes) &&
           q8_dot_usable(up_type, n_embd, up, gu_matrix_bytes, gu_row_bytes) &&
           q8_dot_usable(down_type, n_ff, down, d_matrix_bytes, d_row_bytes);
}

void expert_gate_up_swiglu_q8(GgmlType type, const uint8_t* gate, const uint8_t* up, size_t matrix_bytes,
                              size_t row_bytes, int64_t k, int64_t n_ff, const int32_t* experts, int64_t n_pairs,
                              int x_div, const int8_t* xq, const float* gate_scale, int64_t n_gs,
                              const float* up_scale, int64_t n_us, float limit, float* h, cudaStream_t stream) {
    if (n_pairs <= 0 || n_ff <= 0) return;
    const dim3 grid(unsigned((n_ff + kQ8Warps - 1) / kQ8Warps), unsigned(n_pairs));
    dispatch_q8(type, [&](auto t) {
        launch(expert_gate_up_q8_kernel<decltype(t)::value>, grid, 32 * kQ8Warps, 0, stream, 
            gate, up, matrix_bytes, row_bytes, k, n_ff, experts, x_div, xq, gate_scale, n_gs, up_scale, n_us, limit, h);
    });
    check_launch("expert_gate_up_q8_kernel");
}

void expert_down_combine_q8(GgmlType type, const uint8_t* down, size_t matrix_bytes, size_t row_bytes, int64_t n_ff,
                            int64_t n_embd, const int32_t* experts, const float* weights, const float* down_scale,
                            int64_t n_ds, int64_t n_tok, int n_used, const int8_t* hq, float* out,
                            cudaStream_t stream) {
    if (n_tok <= 0 || n_embd <= 0) return;
    const dim3 grid(unsigned((n_embd + kDownRowsQ8 - 1) / kDownRowsQ8), unsigned(n_tok));
    dispatch_q8(type, [&](auto t) {
        launch(expert_down_combine_q8_kernel<decltype(t)::value>, grid, 32 * n_used, 0, stream, 
            down, matrix_bytes, row_bytes, n_ff, n_embd, experts, weights, down_scale, n_ds, n_used, hq, out);
    });
    check_launch("expert_down_combine_q8_kernel");
}

}  // namespace ds4::cuda

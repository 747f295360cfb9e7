// Prefill products of small F32 matrices (a Qwen3 router: 128 x 2048) over
// many tokens: y[t][r] = W[r] . x[t] in FP32.
//
// Why our own: cuBLAS SGEMM took 1.28 ms a call for that router at 512
// tokens (H200, 2026-12-04), and the matvec kernels it went to instead run
// 64 tokens a launch with one block a row: 165 us a layer, ~6 % of a 512-token
// Qwen3 prefill (bench/logs/2026-12-04b-h200/call4-profile-f16.txt). Here a
// block computes a 32-row x 16-token tile from shared-memory tiles of W and x
// (each W element read once per 16 tokens, each x element once per 32 rows),
// every output one running FMA sum over k in order: FP32 rounding, the CPU's
// bound.
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"

namespace ds4::cuda {
namespace {

constexpr int kTileRows = 32;    // a warp's lanes: one row each
constexpr int kTileTokens = 16;  // four warps, four tokens each
constexpr int kTileK = 64;       // k per shared-memory step
constexpr int kThreads = kTileRows * kTileTokens / 4;
// x's tile rows padded to 20 floats: 16-byte aligned for the float4 reads,
// and the stores of a warp (32 consecutive k of one token) fall on 8 banks
// instead of 2.
constexpr int kXStride = kTileTokens + 4;

__global__ void __launch_bounds__(kThreads)
    small_f32_gemm_kernel(const float* __restrict__ w, int64_t ld_w, int64_t k, int64_t n_rows,
                          const float* __restrict__ x, int64_t ld_x, int64_t n_tok, float* __restrict__ y,
                          int64_t ld_y) {
    __shared__ float ws[kTileK][kTileRows + 1];  // +1: a warp's stores (one row, 32 k) on 32 banks
    __shared__ __align__(16) float xs[kTileK][kXStride];
    wait_for_inputs();
    const int r = threadIdx.x % kTileRows, q = threadIdx.x / kTileRows;  // row r, tokens 4 q .. 4 q + 3
    const int64_t r0 = int64_t(blockIdx.x) * kTileRows, t0 = int64_t(blockIdx.y) * kTileTokens;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t k0 = 0; k0 < k; k0 += kTileK) {
        // Coalesced along k; values past the edges are zeros, which add nothing.
        for (int i = threadIdx.x; i < kTileRows * kTileK; i += kThreads) {
            const int rr = i / kTileK, kk = i % kTileK;
            const int64_t row = r0 + rr, col = k0 + kk;
            ws[kk][rr] = row < n_rows && col < k ? w[row * ld_w + col] : 0.0f;
        }
        for (int i = threadIdx.x; i < kTileTokens * kTileK; i += kThreads) {
            const int tt = i / kTileK, kk = i % kTileK;
            const int64_t tok = t0 + tt, col = k0 + kk;
            xs[kk][tt] = tok < n_tok && col < k ? x[tok * ld_x + col] : 0.0f;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < kTileK; ++kk) {
            const float wv = ws[kk][r];
            const float4 xv = *reinterpret_cast<const float4*>(&xs[kk][4 * q]);  // one address a warp: a broadcast
            acc[0] = fmaf(wv, xv.x, acc[0]);
            acc[1] = fmaf(wv, xv.y, acc[1]);
            acc[2] = fmaf(wv, xv.z, acc[2]);
            acc[3] = fmaf(wv, xv.w, acc[3]);
        }
        __syncthreads();
    }
    const int64_t row = r0 + r;
    if (row >= n_rows) return;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int64_t tok = t0 + 4 * q + i;
        if (tok < n_tok) y[tok * ld_y + row] = acc[i];
    }
}

}  // namespace

void small_f32_gemm(const float* w, int64_t ld_w, int64_t k, int64_t n_rows, const float* x, int64_t ld_x,
                    int64_t n_tok, float* y, int64_t ld_y, cudaStream_t stream) {
    if (n_tok <= 0 || n_rows <= 0) return;
    const int64_t gx = (n_rows + kTileRows - 1) / kTileRows;
    if (gx > INT32_MAX) throw Error("small_f32_gemm: too many rows for one launch.");
    // Grid y holds at most 65,535 tiles of tokens: longer inputs in pieces.
    const int64_t piece = int64_t(65535) * kTileTokens;
    for (int64_t t0 = 0; t0 < n_tok; t0 += piece) {
        const int64_t n = n_tok - t0 < piece ? n_tok - t0 : piece;
        launch(small_f32_gemm_kernel, dim3(unsigned(gx), unsigned((n + kTileTokens - 1) / kTileTokens)), kThreads, 0,
               stream, w, ld_w, k, n_rows, x + t0 * ld_x, ld_x, n, y + t0 * ld_y, ld_y);
        check_launch("small_f32_gemm_kernel");
    }
}

}  // namespace ds4::cuda

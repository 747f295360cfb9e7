// The decode product of 1-64 tokens with Q4_K or Q6_K rows on the int8
// tensor cores, float-grade: activations as split digits (split_digits.h),
// weights as their integer quants, one mma per (16 rows, 8 tokens,
// sub-block, digit), the sub-block's scale (and Q4_K's min) applied to the
// exact integer sums.
//
// Why: the float matvec tile gives a row's weights to 8 tokens on the CUDA
// cores, each lane loading 8 tokens' activations per weight; an 8-sequence
// Qwen3 step spent 48 us a layer in q/k/v/o for ~11 MB of weights (~250
// GB/s, H200 ncu, 2026-12-03) where one sequence spends ~20, and 270 us in
// the 255 MB Q6_K head. Here a warp's activation fragment serves 16 rows,
// the integer products cost little next to the loads, and every token count
// up to 64 reads the weights once. Measured (H100, 2026-12-06): Q4_K q/o at
// 8 tokens 14 -> 8.6 us, at one token 6.5 -> 6.9; the Q6_K variant lost (see
// dense_split_q6k) and is opt-in.
//
// Layout: a block is 16 rows and kMmaWarps warps; warp w takes the
// 256-value blocks (super-blocks) w, w + kMmaWarps, ... of those rows, and
// the block sums the warps' partial outputs in a fixed order. A lane (group
// g = lane / 4, t = lane % 4) holds rows g and g + 8 (the mma's A rows) and
// token g of each tile of 8 (B's column); its outputs are tokens 2 t, 2 t + 1.
//
// Q4_K (m16n8k32, a sub-block of 32 per mma): of every sub-block pair's 32
// quant bytes a lane holds bytes 8 t .. 8 t + 7, whose low nibbles are
// elements 8 t .. 8 t + 7 of the pair's first sub-block and the high nibbles
// the same of the second. The mma's k order is free as long as A and B
// agree: A's k 4 t + i and 16 + 4 t + i are element 8 t + i and 8 t + 4 + i
// here, and so are B's, so one 8-byte load of each digit plane gives a
// token's B fragment. |q| <= 15 and |digit| <= 127 over 32 elements stay
// within 61,000; digit 0's sum times 254^2 does not fit an int32, so the
// join is one float FMA (one rounding, as the int32 join's conversion to
// float in split_dot.cuh).
//
// Q6_K (m16n8k16, a sub-block of 16 per mma, in element order): signed 6-bit
// quants (-32..31) with an int8 scale per 16. The two sub-blocks of a
// 32-element activation block (one unit u) meet in int32 with their scales
// (|sum| <= 16 * 32 * 127 * 128 * 2 < 2^25), then join in float (two
// roundings). Q6_K blocks are 210 bytes, so rows and blocks are only 2-byte
// aligned: weights come in 2-byte loads.
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/env_switch.h"
#include "backend/cuda/split_mma.cuh"

namespace ds4::cuda {
namespace {

constexpr int kMmaWarps = 8;
constexpr int kMmaRows = 16;
constexpr int kMaxTokens = 64;

struct SplitMatrices {
    const uint8_t* w[kMaxSplitMatrices];
    float* y[kMaxSplitMatrices];
    int64_t n_rows[kMaxSplitMatrices], ld_y[kMaxSplitMatrices];
    int64_t first_block[kMaxSplitMatrices];  // the matrix's first block of the grid
    int n;
};

// y[tok][r] = W[r] . x[tok] for tok < n_tok (<= kMaxTokens); xs: n_tok
// split rows (quantize_rows_split) of ld_xs bytes. Tokens go in tiles of 8,
// one tile at a time (the partial sums of a tile in registers, then in
// shared memory), so registers do not grow with the batch. Up to
// kMaxSplitMatrices matrices of one input (a block's q, k and v) in one
// launch, each its own run of blocks: one kernel boundary instead of three
// in a decode layer's chain, and every row's sum the same expression.
template <class F>
__global__ void __launch_bounds__(32 * kMmaWarps, 2)
    split_mma_kernel(SplitMatrices m, size_t row_bytes, int64_t k, const int8_t* __restrict__ xs, int64_t ld_xs,
                     int n_tok) {
    __shared__ float part[kMmaWarps][kMmaRows][kMaxTokens];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    // This block's matrix (constant indices: the parameters stay in their bank).
    const uint8_t* w = m.w[0];
    float* y = m.y[0];
    int64_t n_rows = m.n_rows[0], ld_y = m.ld_y[0], first = 0;
#pragma unroll
    for (int i = 1; i < kMaxSplitMatrices; ++i)
        if (i < m.n && int64_t(blockIdx.x) >= m.first_block[i]) {
            w = m.w[i];
            y = m.y[i];
            n_rows = m.n_rows[i];
            ld_y = m.ld_y[i];
            first = m.first_block[i];
        }
    const int64_t r0 = (int64_t(blockIdx.x) - first) * kMmaRows;
    // Rows past the end read the last row again (not stored).
    const uint8_t* row_lo = w + size_t(min(r0 + g, n_rows - 1)) * row_bytes;
    const uint8_t* row_hi = w + size_t(min(r0 + g + 8, n_rows - 1)) * row_bytes;
    const int64_t n_sb = k / 256;
    const int n_tiles = (n_tok + 7) / 8;

    // Weights do not change during a step: this warp's first super-block is
    // on its way while the kernel before finishes. (Loaded, not only
    // prefetched, ahead of wait_for_inputs: no kernel writes weight bytes;
    // streamed experts arrive by copies, which a programmatic launch still
    // waits for.)
    int64_t s = warp;
    typename F::Lane cur{};
    if (s < n_sb) cur = F::load(row_lo + s * F::kBlockBytes, row_hi + s * F::kBlockBytes, t);
    // This lane's partial sums (rows g, g + 8; tokens 2 t, 2 t + 1 of each tile).
    for (int tt = 0; tt < n_tiles; ++tt)
#pragma unroll
        for (int c = 0; c < 4; ++c) part[warp][g + 8 * (c >> 1)][8 * tt + 2 * t + (c & 1)] = 0.0f;
    wait_for_inputs();

    for (; s < n_sb; s += kMmaWarps) {
        typename F::Lane next{};
        if (s + kMmaWarps < n_sb)
            next = F::load(row_lo + (s + kMmaWarps) * F::kBlockBytes, row_hi + (s + kMmaWarps) * F::kBlockBytes, t);
#pragma unroll 1
        for (int tt = 0; tt < n_tiles; ++tt) {
            // Tokens past n_tok read the last one again (not stored).
            TokenTile x;
            x.xb = xs + int64_t(min(8 * tt + g, n_tok - 1)) * ld_xs;
#pragma unroll
            for (int c = 0; c < 2; ++c)
                x.xu[c] = reinterpret_cast<const float*>(xs + int64_t(min(8 * tt + 2 * t + c, n_tok - 1)) * ld_xs + 3 * k);
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            F::dot(cur, s, k, t, x, acc);
#pragma unroll
            for (int c = 0; c < 4; ++c) part[warp][g + 8 * (c >> 1)][8 * tt + 2 * t + (c & 1)] += acc[c];
        }
        cur = next;
    }

    // The warps' partial sums, added in warp order.
    __syncthreads();
    for (int i = threadIdx.x; i < kMmaRows * 8 * n_tiles; i += blockDim.x) {
        const int r = i / (8 * n_tiles), tok = i % (8 * n_tiles);
        if (r0 + r >= n_rows || tok >= n_tok) continue;
        float v = 0.0f;
#pragma unroll
        for (int wi = 0; wi < kMmaWarps; ++wi) v += part[wi][r][tok];
        y[int64_t(tok) * ld_y + r0 + r] = v;
    }
}

}  // namespace

// DS4_CUDA_DENSE_SPLIT=0 keeps the dense decode products on the float matvec
// kernels (A/B); DS4_CUDA_DENSE_SPLIT_Q6K=1 sends Q6_K rows here too. Q6_K
// stays on the float kernels by default: its 2-byte loads made the 151,936-row
// Qwen3 head 2.4x slower at one token and 1.4x at eight (H100 ncu,
// 2026-12-06; bench/logs/2026-12-06c-h100). Read once.
bool dense_split_enabled() {
    static const bool on = env_switch("DS4_CUDA_DENSE_SPLIT", true);
    return on;
}
static bool dense_split_q6k() {
    static const bool on = env_switch("DS4_CUDA_DENSE_SPLIT_Q6K", false);
    return on;
}

bool dense_split_supported(GgmlType type, int64_t k, const void* w, size_t row_bytes, int64_t n_tok, const float* x,
                           int64_t ld_x) {
    const bool x_ok = n_tok >= 1 && n_tok <= kMaxTokens && reinterpret_cast<uintptr_t>(x) % 16 == 0 && ld_x % 4 == 0;
    if (!x_ok || k % 256 != 0 || k / 256 > INT32_MAX) return false;
    if (type == GgmlType::Q4_K)
        return row_bytes == size_t(k / 256) * Q4kFormat::kBlockBytes && reinterpret_cast<uintptr_t>(w) % 16 == 0;
    if (type == GgmlType::Q6_K && dense_split_q6k())
        return row_bytes == size_t(k / 256) * Q6kFormat::kBlockBytes && reinterpret_cast<uintptr_t>(w) % 2 == 0;
    return false;
}

void matmul_split(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t k, int64_t n_rows, const int8_t* xs,
                  int64_t n_tok, float* y, int64_t ld_y, cudaStream_t stream) {
    const SplitProduct one{w, n_rows, y, ld_y};
    matmuls_split(type, row_bytes, k, &one, 1, xs, n_tok, stream);
}

void matmuls_split(GgmlType type, size_t row_bytes, int64_t k, const SplitProduct* p, int n, const int8_t* xs,
                   int64_t n_tok, cudaStream_t stream) {
    if (n < 1 || n > kMaxSplitMatrices) throw Error("matmuls_split: 1 to " + std::to_string(kMaxSplitMatrices) + " matrices a call.");
    if (n_tok <= 0) return;
    if (n_tok > kMaxTokens) throw Error("matmul_split: at most 64 tokens a call, not " + std::to_string(n_tok) + ".");
    SplitMatrices m{};
    int64_t blocks = 0;
    for (int i = 0; i < n; ++i) {
        if (p[i].n_rows <= 0) continue;
        m.w[m.n] = p[i].w;
        m.y[m.n] = p[i].y;
        m.n_rows[m.n] = p[i].n_rows;
        m.ld_y[m.n] = p[i].ld_y;
        m.first_block[m.n++] = blocks;
        blocks += (p[i].n_rows + kMmaRows - 1) / kMmaRows;
    }
    if (blocks == 0) return;
    if (blocks > INT32_MAX) throw Error("matmul_split: too many rows.");
    const int64_t ld_xs = split_activation_bytes(k);
    if (type == GgmlType::Q4_K)
        launch(split_mma_kernel<Q4kFormat>, unsigned(blocks), 32 * kMmaWarps, 0, stream, m, row_bytes, k, xs, ld_xs,
               int(n_tok));
    else if (type == GgmlType::Q6_K)
        launch(split_mma_kernel<Q6kFormat>, unsigned(blocks), 32 * kMmaWarps, 0, stream, m, row_bytes, k, xs, ld_xs,
               int(n_tok));
    else
        throw Error("matmul_split: no split product for " + std::string(ggml_type_name(type)) + " rows.");
    check_launch("split_mma_kernel");
}

}  // namespace ds4::cuda

// Prefill products of Q4_K and Q6_K rows on the f16 tensor cores with each
// weight decoded once, by the lane whose mma fragment holds it, straight into
// registers: gemm_f16_kernel's numbers (every weight its exact decoded value
// rounded to f16, by ChunkDecoder's expressions; activations the same scaled
// f16 rows; f32 accumulation) without its shared-memory round trip of the
// decoded tile.
//
// Why: gemm_f16_kernel copies a step's raw blocks to shared memory, decodes
// them there into a second tile of f16 weights, and reads that back with
// ldmatrix; its 77 KB of shared memory a block leave room for three blocks
// (12 warps) an SM, and a 512-token Qwen3 prefill spends ~half its time in
// those products for the routed experts (1.3 ms a layer; NOTES 2026-12-04:
// 18 % occupancy, issue-bound, DRAM 3 %). Here a warp owns 16 weight rows and
// all 64 tokens of the tile: its lanes load their rows' bytes from global
// memory into registers (the next step's while this one computes), decode
// them, and only the activations go through shared memory (~35 KB a block).
// A tile of the routed experts holds ~32 pairs on average; n-tiles past the
// tile's pairs are skipped (the old kernel multiplied zeros).
//
// The k order inside an mma is free as long as A and B agree: lane (g, t)
// takes four consecutive elements of the weight row for A's k 2 t, 2 t + 1,
// 2 t + 8, 2 t + 9 (rows g and g + 8), and the same four elements of token
// g's row for B's, so its B registers are one load from shared memory.
//   Q4_K: elements 8 t + 4 c .. + 3 (c = 0, 1) of a 32-element sub-block are
//   quant bytes 8 t + 4 c .. + 3 of its pair (low nibbles: sub-block 2 p,
//   high: 2 p + 1); two mma steps share one 16-byte B load.
//   Q6_K: elements 4 t .. 4 t + 3 of a 16-element sub-block (one scale),
//   split_mma.cuh's Q6kFormat lane layout; one 8-byte B load a step.
// A lane's bytes are loaded as split_mma.cuh's formats load them for the
// int8 decode products.
#include <cuda_fp16.h>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/mma_f16.cuh"
#include "backend/cuda/quant_decode.cuh"
#include "backend/cuda/split_mma.cuh"  // Q4kFormat / Q6kFormat: a lane's bytes of a step of two rows
#include "backend/cuda/warp_dot.cuh"   // small_u2f, s8_to_f

namespace ds4::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kRows = 16 * kWarps;             // weight rows a block computes
constexpr int kTokens = int(kGemmTileTokens);  // tokens a block computes
constexpr int kStep = 256;                     // k per main-loop step: one super-block

__device__ __forceinline__ uint32_t half2_bits(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
}

// Q4_K: a lane's bytes of a step of its two rows are split_mma.cuh's
// Q4kFormat::Lane (the 16-byte heads: d, dmin, scales; bytes 8 t .. 8 t + 7
// of each sub-block pair's quants).
struct Q4kFrag {
    using Format = Q4kFormat;
    // 576-byte token rows (64 mod 128): the 16-byte loads of a quarter-warp
    // (tokens g = 0, 1; offsets 16 t) fall on distinct banks.
    static constexpr int kXs = kStep + 32;
    // The four nibbles at bits 0, 8, 16, 24 of w as a * q - b
    // (ChunkDecoder<Q4_K>: two roundings in float), then f16.
    static __device__ __forceinline__ void decode4(uint32_t w, float a, float b, uint32_t& first, uint32_t& second) {
        float f[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) f[e] = __fsub_rn(__fmul_rn(a, small_u2f((w >> (8 * e)) & 0xFu)), b);
        first = half2_bits(f[0], f[1]);
        second = half2_bits(f[2], f[3]);
    }
    // acc[j] += this step's 16 rows (g: row 0 of the lane, g + 8: row 1) x
    // tokens 8 j .. 8 j + 7, j < n_tiles.
    static __device__ __forceinline__ void step(const Format::Lane& w, const __half* xs, int g, int t, int n_tiles,
                                                float (&acc)[8][4]) {
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            const Q4kFactors f_lo = q4k_factors(w.head[0], p, [](uint32_t v) { return float(v); });
            const Q4kFactors f_hi = q4k_factors(w.head[1], p, [](uint32_t v) { return float(v); });
#pragma unroll
            for (int nib = 0; nib < 2; ++nib) {
                const float a_lo = nib ? f_lo.a1 : f_lo.a0, b_lo = nib ? f_lo.b1 : f_lo.b0;
                const float a_hi = nib ? f_hi.a1 : f_hi.a0, b_hi = nib ? f_hi.b1 : f_hi.b0;
                uint32_t a[2][4];
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    decode4((c ? w.q[0][p].y : w.q[0][p].x) >> (4 * nib), a_lo, b_lo, a[c][0], a[c][2]);
                    decode4((c ? w.q[1][p].y : w.q[1][p].x) >> (4 * nib), a_hi, b_hi, a[c][1], a[c][3]);
                }
                const int e = (2 * p + nib) * 32 + 8 * t;  // the lane's 8 elements of the sub-block
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    if (j < n_tiles) {
                        const uint4 b = *reinterpret_cast<const uint4*>(xs + (8 * j + g) * kXs + e);
                        mma_16816(acc[j], a[0], b.x, b.y);
                        mma_16816(acc[j], a[1], b.z, b.w);
                    }
                }
            }
        }
    }
};

// Q6_K (rows only 2-byte aligned): split_mma.cuh's Q6kFormat::Lane, whose
// quants() gives element 16 b + 4 t + i of sub-block b as the signed byte
// q - 32.
struct Q6kFrag {
    using Format = Q6kFormat;
    // 544-byte token rows (32 mod 128): the 8-byte loads of a half-warp
    // (tokens g = 0..3; offsets 8 t) fall on distinct banks.
    static constexpr int kXs = kStep + 16;
    // Sub-block b's four values of row r as f16 pairs: d * sc[b] * (q - 32)
    // (ChunkDecoder<Q6_K>'s expressions; q - 32 converted exactly).
    static __device__ __forceinline__ void decode4(const Format::Lane& w, int r, int b, uint32_t& first,
                                                   uint32_t& second) {
        const float a = __fmul_rn(w.d[r], float(Format::scale_of(w, r, b)));
        const uint32_t q = Format::quants(w, r, b >> 3, (b >> 1) & 3, b & 1);
        float f[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) f[e] = __fmul_rn(a, s8_to_f(q >> (8 * e)));
        first = half2_bits(f[0], f[1]);
        second = half2_bits(f[2], f[3]);
    }
    static __device__ __forceinline__ void step(const Format::Lane& w, const __half* xs, int g, int t, int n_tiles,
                                                float (&acc)[8][4]) {
#pragma unroll
        for (int b = 0; b < 16; ++b) {
            uint32_t a[4];
            decode4(w, 0, b, a[0], a[2]);
            decode4(w, 1, b, a[1], a[3]);
            const int e = 16 * b + 4 * t;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                if (j < n_tiles) {
                    const uint2 v = *reinterpret_cast<const uint2*>(xs + (8 * j + g) * kXs + e);
                    mma_16816(acc[j], a, v.x, v.y);
                }
            }
        }
    }
};

// y[t0 + n][m] = scale[t0 + n] * sum_i W_mat[m][i] xh[t0 + n][i] for the tile's
// tokens n < nt (tiles as gemm_f16_kernel's) and rows m of blockIdx.x's 64.
template <class F>
__global__ void __launch_bounds__(32 * kWarps, 4)
    gemm_frag_kernel(const uint8_t* __restrict__ w, size_t matrix_bytes, size_t row_bytes, int64_t k, int64_t n_rows,
                     const int32_t* __restrict__ tiles, int64_t n_tok, const __half* __restrict__ xh, int64_t ld_h,
                     const float* __restrict__ scale, float* __restrict__ y, int64_t ld_y) {
    __shared__ __align__(16) __half xs[kTokens * F::kXs];
    wait_for_inputs();
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int64_t m0 = int64_t(blockIdx.x) * kRows;
    const GemmTile tile = gemm_tile(tiles, n_tok, kTokens);
    if (tile.nt <= 0) return;
    const int64_t mat = tile.mat, t0 = tile.t0, nt = tile.nt;
    const int n_tiles = int((nt + 7) / 8);  // the same in every warp
    const int rows_in = n_tiles * 8;       // token rows read from shared memory
    // Rows g and g + 8 of this warp's 16; past the end the last row again (not stored).
    const int64_t r_lo = m0 + 16 * warp + g, r_hi = r_lo + 8;
    const uint8_t* wm = w + size_t(mat) * matrix_bytes;
    const uint8_t* row_lo = wm + size_t(min(r_lo, n_rows - 1)) * row_bytes;
    const uint8_t* row_hi = wm + size_t(min(r_hi, n_rows - 1)) * row_bytes;
    const int64_t n_steps = k / kStep;

    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[j][c] = 0.0f;

    using Format = typename F::Format;
    typename Format::Lane cur = Format::load(row_lo, row_hi, t);
    for (int64_t s = 0; s < n_steps; ++s) {
        const int64_t k0 = s * kStep;
        __syncthreads();  // every warp is done with the previous step's activations
        for (int p = tid; p < rows_in * (kStep / 8); p += 32 * kWarps) {
            const int n = p / (kStep / 8), c = (p % (kStep / 8)) * 8;
            __half* dst = xs + n * F::kXs + c;
            if (n < nt)
                cp_async16(dst, xh + (t0 + n) * ld_h + k0 + c);
            else
                *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
        }
        // The next step's weights on their way while this one computes.
        typename Format::Lane next = cur;
        if (s + 1 < n_steps)
            next = Format::load(row_lo + (s + 1) * Format::kBlockBytes, row_hi + (s + 1) * Format::kBlockBytes, t);
        cp_async_wait_all();
        __syncthreads();
        F::step(cur, xs, g, t, n_tiles, acc);
        cur = next;
    }
    // c0, c1: row g, tokens 8 j + 2 t, 8 j + 2 t + 1; c2, c3: row g + 8.
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int64_t m = (c < 2 ? r_lo : r_hi);
            const int n = 8 * j + 2 * t + (c & 1);
            if (n < nt && m < n_rows) y[(t0 + n) * ld_y + m] = acc[j][c] * scale[t0 + n];
        }
}

template <class F>
bool rows_usable(const uint8_t* w, size_t matrix_bytes, size_t row_bytes, int64_t k, size_t align) {
    return k % kStep == 0 && row_bytes == size_t(k / kStep) * F::Format::kBlockBytes &&
           (reinterpret_cast<uintptr_t>(w) | matrix_bytes | row_bytes) % align == 0;
}

}  // namespace

bool gemm_frag_usable(GgmlType type, const uint8_t* w, size_t matrix_bytes, size_t row_bytes, int64_t k) {
    if (type == GgmlType::Q4_K) return rows_usable<Q4kFrag>(w, matrix_bytes, row_bytes, k, 16);
    if (type == GgmlType::Q6_K) return rows_usable<Q6kFrag>(w, matrix_bytes, row_bytes, k, 2);
    return false;
}

void gemm_frag(GgmlType type, const uint8_t* w, size_t matrix_bytes, size_t row_bytes, int64_t k, int64_t n_rows,
               const int32_t* tiles, int64_t n_tiles, int64_t n_tok, const uint16_t* xh, int64_t ld_h,
               const float* scale, float* y, int64_t ld_y, cudaStream_t stream) {
    if (n_rows <= 0 || k <= 0) return;
    if (!gemm_frag_usable(type, w, matrix_bytes, row_bytes, k))
        throw Error("CUDA gemm_frag: rows that are not whole, aligned Q4_K or Q6_K super-blocks.");
    if (!tiles) n_tiles = (n_tok + kTokens - 1) / kTokens;
    if (n_tiles <= 0) return;
    if (n_tiles > 65535) throw Error("CUDA gemm_frag: more than 65535 token tiles in one call.");
    if ((n_rows + kRows - 1) / kRows > 0x7fffffff) throw Error("CUDA gemm_frag: too many weight rows.");
    if (ld_h % 8 != 0 || ld_h < k) throw Error("CUDA gemm_frag: bad half row stride.");
    const dim3 grid(unsigned((n_rows + kRows - 1) / kRows), unsigned(n_tiles));
    const auto* h = reinterpret_cast<const __half*>(xh);
    if (type == GgmlType::Q4_K)
        launch(gemm_frag_kernel<Q4kFrag>, grid, dim3(32 * kWarps), 0, stream, w, matrix_bytes, row_bytes, k, n_rows,
               tiles, n_tok, h, ld_h, scale, y, ld_y);
    else
        launch(gemm_frag_kernel<Q6kFrag>, grid, dim3(32 * kWarps), 0, stream, w, matrix_bytes, row_bytes, k, n_rows,
               tiles, n_tok, h, ld_h, scale, y, ld_y);
    check_launch("gemm_frag_kernel");
}

}  // namespace ds4::cuda

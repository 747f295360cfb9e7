// The routed experts of a decode step on the int8 tensor cores, over split
// activations (split_digits.h): each chosen expert's rows read once for all
// the pairs that chose it, as the A operand of mma tiles whose B columns are
// those pairs' split rows.
//
// Why: the per-pair split kernels (moe_split.cu) read an expert once per
// (token, slot) pair. At 8 sequences (64 pairs over 128 experts, ~50
// distinct) that is ~22 % more expert bytes than needed, and their __dp4a
// dots spend the issue slots that the dense products saved by moving to the
// mma (dense_split_mma.cu: Q4_K q/o at 8 tokens 14 -> 8.6 us). The Q6_K
// downs (half the layers of a Q4_K_M file) had no split kernel at all
// (2-byte loads of 210-byte blocks lost to the float kernel): here each warp
// copies its rows' blocks into shared memory in 16-byte pieces (cp.async)
// and decodes them from there.
//
// Values: an output element is its own pair's integer sums and float
// epilogue, summed over the warps of its row group in a fixed order, so it
// does not depend on which other pairs share its tile, on the grouping
// (pairs grouped by expert, or one pair a tile), or on the batch.
//
// Layout: a block is NW warps (8 unless DS4_CUDA_MOE_MMA_WARPS says) over NW / WK row groups of 16
// rows; the WK warps of a group split the row's super-blocks (s = ks, ks +
// WK, ...). Within a warp the lane layout of split_mma.cuh: rows g, g + 8
// (A), column g of each tile of 8 pairs (B), outputs at columns 2 t, 2 t + 1.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/env_switch.h"
#include "backend/cuda/moe_epilogue.cuh"
#include "backend/cuda/split_dot.cuh"
#include "backend/cuda/split_mma.cuh"

namespace ds4::cuda {
namespace {

constexpr int kMmaRows = 16;
constexpr int kMaxCols = int(kGemmTileTokens);  // pairs of one tile
// A Q6_K block (210 bytes from a 2-byte aligned address) is covered by at
// most 14 aligned 16-byte pieces.
constexpr int kStagePieces = 14;
constexpr int kStageBytes = 16 * kStagePieces;
// Whether F's blocks go through shared memory (Q6_K: rows not 16-byte
// aligned), and how much a kernel of `warps` warps then needs: two buffers
// of 16 rows a warp.
template <class F>
constexpr bool kStagedFormat = F::kBlockBytes % 16 != 0;
template <class F>
constexpr size_t stage_smem(int warps) {
    return kStagedFormat<F> ? size_t(warps) * 2 * kMmaRows * kStageBytes : 0;
}

// One tile: expert e's pairs pair_of_row[first .. first + cols), or, without
// a tile list, pair `first` alone (cols 1).
struct Tile {
    int64_t e;
    int first;
    int cols;
};
__device__ __forceinline__ Tile tile_at(const int32_t* tiles, const int32_t* experts, int i) {
    if (tiles) return {tiles[3 * i], tiles[3 * i + 1], tiles[3 * i + 2]};
    return {experts[i], i, 1};
}
__device__ __forceinline__ int64_t pair_of(const int32_t* tiles, const int32_t* pair_of_row, const Tile& tl, int j) {
    return tiles ? pair_of_row[tl.first + j] : tl.first;
}

// The 16-byte pieces that cover a Q6_K block of each of 16 rows (block s of
// rows r0 .. r0 + 15; rows past n_rows read the last) into buf, row r at buf +
// r * kStageBytes + (its start % 16); one commit group.
__device__ __forceinline__ void stage_q6k(const uint8_t* mat, size_t row_bytes, int64_t r0, int64_t n_rows, int64_t s,
                                          uint8_t* buf, int lane) {
    for (int i = lane; i < kMmaRows * kStagePieces; i += 32) {
        const int r = i / kStagePieces, piece = i % kStagePieces;
        const uint8_t* blk = mat + size_t(min(r0 + r, n_rows - 1)) * row_bytes + size_t(s) * Q6kFormat::kBlockBytes;
        const uint8_t* src = reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(blk) & ~uintptr_t(15)) +
                             16 * piece;
        if (src < blk + Q6kFormat::kBlockBytes) cp_async16(buf + r * kStageBytes + 16 * piece, src);
    }
    cp_async_commit();
}

// A warp's partial sums (rows g, g + 8; columns 2 t, 2 t + 1 of each tile of 8) set to zero.
__device__ __forceinline__ void zero_partials(float (&part)[kMmaRows][kMaxCols], int n_tiles, int g, int t) {
    for (int tt = 0; tt < n_tiles; ++tt)
#pragma unroll
        for (int c = 0; c < 4; ++c) part[g + 8 * (c >> 1)][8 * tt + 2 * t + (c & 1)] = 0.0f;
}

// The pairs of one tile and where their split rows are (pair p reads row p / x_div of xs).
struct TileColumns {
    Tile tl;
    int n_tiles;  // tiles of 8 columns
    const int32_t* tiles;
    const int32_t* pair_of_row;
    int x_div;
    const int8_t* xs;
    int64_t ld_xs;
    __device__ __forceinline__ int64_t pair(int j) const { return pair_of(tiles, pair_of_row, tl, j); }
};

// part += the products of super-block s of a warp's rows (this lane's share
// of it in w) with every tile of 8 columns; columns past the tile's end read
// its last pair again (not stored). Each mma sum starts from zero and is
// added to part once.
template <class F>
__device__ __forceinline__ void add_tile_products(float (&part)[kMmaRows][kMaxCols], const typename F::Lane& w,
                                                  int64_t s, int64_t k, int g, int t, const TileColumns& tc) {
#pragma unroll 1
    for (int tt = 0; tt < tc.n_tiles; ++tt) {
        TokenTile x;
        x.xb = tc.xs + tc.pair(min(8 * tt + g, tc.tl.cols - 1)) / tc.x_div * tc.ld_xs;
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            const int64_t p = tc.pair(min(8 * tt + 2 * t + c, tc.tl.cols - 1));
            x.xu[c] = reinterpret_cast<const float*>(tc.xs + p / tc.x_div * tc.ld_xs + 3 * k);
        }
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        F::dot(w, s, k, t, x, acc);
#pragma unroll
        for (int c = 0; c < 4; ++c) part[g + 8 * (c >> 1)][8 * tt + 2 * t + (c & 1)] += acc[c];
    }
}

// y[pair][m * n_rows + r] = W_m,e[r] . x'(pair) for every tile's pairs, W_m
// the matrices of w0 (m = 0) and w1 (m = 1, when given), e the tile's
// expert (matrix e at + e * matrix_bytes), x'(pair) split row pair / x_div
// of xs. Grid: x = matrices x row blocks, y = tiles; a tile of 0 columns
// (the list's padding) computes nothing.
template <class F, int NW, int WK>
__global__ void __launch_bounds__(32 * NW, 16 / NW)
    expert_split_mma_kernel(const uint8_t* __restrict__ w0, const uint8_t* __restrict__ w1, size_t matrix_bytes,
                            size_t row_bytes, int64_t k, int64_t n_rows, int64_t n_exp,
                            const int32_t* __restrict__ tiles, const int32_t* __restrict__ pair_of_row,
                            const int32_t* __restrict__ experts, int x_div, const int8_t* __restrict__ xs,
                            int64_t ld_xs, float* __restrict__ y, int64_t ld_y) {
    constexpr int kGroups = NW / WK;
    constexpr bool kStaged = kStagedFormat<F>;
    __shared__ float part[NW][kMmaRows][kMaxCols];
    extern __shared__ __align__(16) uint8_t stage[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int rg = warp / WK, ks = warp % WK;
    const int64_t row_blocks = (n_rows + kGroups * kMmaRows - 1) / (kGroups * kMmaRows);
    const int m = int(blockIdx.x / row_blocks);
    const int64_t block_r0 = int64_t(blockIdx.x % row_blocks) * kGroups * kMmaRows;
    const int64_t r0 = block_r0 + rg * kMmaRows;
    wait_for_inputs();
    const Tile tl = tile_at(tiles, experts, blockIdx.y);
    // The same for the whole block, before any barrier. Ids out of range
    // (which the routing kernels never write) compute nothing.
    if (tl.cols <= 0 || tl.e < 0 || tl.e >= n_exp) return;
    const uint8_t* mat = (m ? w1 : w0) + size_t(tl.e) * matrix_bytes;
    const int64_t n_sb = k / 256;
    const int n_tiles = (tl.cols + 7) / 8;
    // Rows past the end read the last row again (not stored).
    const uint8_t* row_lo = mat + size_t(min(r0 + g, n_rows - 1)) * row_bytes;
    const uint8_t* row_hi = mat + size_t(min(r0 + g + 8, n_rows - 1)) * row_bytes;
    zero_partials(part[warp], n_tiles, g, t);
    const TileColumns tc{tl, n_tiles, tiles, pair_of_row, x_div, xs, ld_xs};
    auto tiles_dot = [&](const typename F::Lane& w, int64_t s) { add_tile_products<F>(part[warp], w, s, k, g, t, tc); };

    if constexpr (kStaged) {
        // Two buffers a warp: block s + WK on its way while s is computed.
        uint8_t* buf[2] = {stage + size_t(2 * warp) * kMmaRows * kStageBytes,
                           stage + size_t(2 * warp + 1) * kMmaRows * kStageBytes};
        int b = 0;
        if (ks < n_sb) stage_q6k(mat, row_bytes, r0, n_rows, ks, buf[0], lane);
        for (int64_t s = ks; s < n_sb; s += WK, b ^= 1) {
            if (s + WK < n_sb) {
                stage_q6k(mat, row_bytes, r0, n_rows, s + WK, buf[b ^ 1], lane);
                cp_async_wait_group<1>();
            } else {
                cp_async_wait_group<0>();
            }
            __syncwarp();
            const size_t off = s * F::kBlockBytes;
            const uint8_t* lo = buf[b] + g * kStageBytes + ((reinterpret_cast<uintptr_t>(row_lo) + off) & 15);
            const uint8_t* hi = buf[b] + (g + 8) * kStageBytes + ((reinterpret_cast<uintptr_t>(row_hi) + off) & 15);
            const typename F::Lane cur = F::load(lo, hi, t);
            __syncwarp();  // every lane has read buf[b] before the next round's copy into it
            tiles_dot(cur, s);
        }
    } else {
        int64_t s = ks;
        typename F::Lane cur{};
        if (s < n_sb) cur = F::load(row_lo + s * F::kBlockBytes, row_hi + s * F::kBlockBytes, t);
        for (; s < n_sb; s += WK) {
            typename F::Lane next{};
            if (s + WK < n_sb) next = F::load(row_lo + (s + WK) * F::kBlockBytes, row_hi + (s + WK) * F::kBlockBytes, t);
            tiles_dot(cur, s);
            cur = next;
        }
    }

    // Each row group's partial sums, added in warp order.
    __syncthreads();
    const int cols8 = 8 * n_tiles;
    for (int i = threadIdx.x; i < kGroups * kMmaRows * cols8; i += blockDim.x) {
        const int grp = i / (kMmaRows * cols8), r = (i / cols8) % kMmaRows, col = i % cols8;
        const int64_t row = block_r0 + grp * kMmaRows + r;
        if (row >= n_rows || col >= tl.cols) continue;
        float v = 0.0f;
#pragma unroll
        for (int j = 0; j < WK; ++j) v += part[grp * WK + j][r][col];
        y[pair_of(tiles, pair_of_row, tl, col) * ld_y + m * n_rows + row] = v;
    }
}

// The streaming variant (DS4_CUDA_MOE_MMA_STREAM=1): a warp computes whole
// row groups (16 rows over every super-block in order), groups_per_warp of
// them, as one stream of (row group, super-block) steps in which the next
// step's weights are on their way while the current one is computed, also
// across row groups. Why: in expert_split_mma_kernel every block pays the
// chain wait -> tile -> weights -> mma -> barrier -> store once for 16-128
// rows, and two blocks an SM left the memory idle between them. Values:
// those of expert_split_mma_kernel<F, NW, 1> (per step a sum from zero,
// added to the row's running sum).
template <class F, int NW>
__global__ void __launch_bounds__(32 * NW, 16 / NW)
    expert_split_mma_stream_kernel(const uint8_t* __restrict__ w0, const uint8_t* __restrict__ w1,
                                   size_t matrix_bytes, size_t row_bytes, int64_t k, int64_t n_rows, int64_t n_exp,
                                   const int32_t* __restrict__ tiles, const int32_t* __restrict__ pair_of_row,
                                   const int32_t* __restrict__ experts, int x_div, const int8_t* __restrict__ xs,
                                   int64_t ld_xs, float* __restrict__ y, int64_t ld_y, int groups_per_warp) {
    constexpr bool kStaged = kStagedFormat<F>;
    __shared__ float part[NW][kMmaRows][kMaxCols];
    extern __shared__ __align__(16) uint8_t stage[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int64_t groups_per_mat = (n_rows + kMmaRows - 1) / kMmaRows;
    const int64_t n_groups = groups_per_mat * (w1 ? 2 : 1);
    const int64_t q0 = (int64_t(blockIdx.x) * NW + warp) * groups_per_warp;
    const int64_t q1 = min(q0 + groups_per_warp, n_groups);
    wait_for_inputs();
    const Tile tl = tile_at(tiles, experts, blockIdx.y);
    // No block barrier follows: a warp with no rows, or a tile of no
    // columns (the list's padding) or an id out of range, simply ends.
    if (q0 >= q1 || tl.cols <= 0 || tl.e < 0 || tl.e >= n_exp) return;
    const int64_t n_sb = k / 256;
    const int n_tiles = (tl.cols + 7) / 8;

    // Row group q: its matrix and its rows g and g + 8 (past the end: the last row again, not stored).
    struct Rows {
        const uint8_t* mat;
        const uint8_t* lo;
        const uint8_t* hi;
        int64_t r0;
        int m;
    };
    auto rows_of = [&](int64_t q) {
        Rows r;
        r.m = int(q / groups_per_mat);
        r.r0 = (q % groups_per_mat) * kMmaRows;
        r.mat = (r.m ? w1 : w0) + size_t(tl.e) * matrix_bytes;
        r.lo = r.mat + size_t(min(r.r0 + g, n_rows - 1)) * row_bytes;
        r.hi = r.mat + size_t(min(r.r0 + g + 8, n_rows - 1)) * row_bytes;
        return r;
    };
    auto zero = [&] { zero_partials(part[warp], n_tiles, g, t); };
    // This lane's finished outputs of row group `r` (its own entries of part: no barrier).
    auto flush = [&](const Rows& r) {
        for (int tt = 0; tt < n_tiles; ++tt)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int col = 8 * tt + 2 * t + (c & 1);
                const int64_t row = r.r0 + g + 8 * (c >> 1);
                if (col < tl.cols && row < n_rows)
                    y[pair_of(tiles, pair_of_row, tl, col) * ld_y + r.m * n_rows + row] = part[warp][row - r.r0][col];
            }
    };
    const TileColumns tc{tl, n_tiles, tiles, pair_of_row, x_div, xs, ld_xs};
    auto tiles_dot = [&](const typename F::Lane& w, int64_t s) { add_tile_products<F>(part[warp], w, s, k, g, t, tc); };

    zero();
    int64_t q = q0, s = 0;  // the step being computed
    Rows cur_rows = rows_of(q);
    if constexpr (kStaged) {
        uint8_t* buf[2] = {stage + size_t(2 * warp) * kMmaRows * kStageBytes,
                           stage + size_t(2 * warp + 1) * kMmaRows * kStageBytes};
        int b = 0;
        stage_q6k(cur_rows.mat, row_bytes, cur_rows.r0, n_rows, 0, buf[0], lane);
        while (true) {
            // The next step: its copy on its way before this one is decoded.
            int64_t nq = q, ns = s + 1;
            if (ns == n_sb) ns = 0, ++nq;
            const bool more = nq < q1;
            Rows next_rows = cur_rows;
            if (more) {
                if (nq != q) next_rows = rows_of(nq);
                stage_q6k(next_rows.mat, row_bytes, next_rows.r0, n_rows, ns, buf[b ^ 1], lane);
                cp_async_wait_group<1>();
            } else {
                cp_async_wait_group<0>();
            }
            __syncwarp();
            const size_t off = s * F::kBlockBytes;
            const uint8_t* lo = buf[b] + g * kStageBytes + ((reinterpret_cast<uintptr_t>(cur_rows.lo) + off) & 15);
            const uint8_t* hi =
                buf[b] + (g + 8) * kStageBytes + ((reinterpret_cast<uintptr_t>(cur_rows.hi) + off) & 15);
            const typename F::Lane w = F::load(lo, hi, t);
            __syncwarp();  // every lane has read buf[b] before the next step's copy into it
            tiles_dot(w, s);
            if (ns == 0) {
                flush(cur_rows);
                zero();
            }
            if (!more) break;
            q = nq, s = ns, cur_rows = next_rows, b ^= 1;
        }
    } else {
        typename F::Lane cur = F::load(cur_rows.lo, cur_rows.hi, t);
        while (true) {
            int64_t nq = q, ns = s + 1;
            if (ns == n_sb) ns = 0, ++nq;
            const bool more = nq < q1;
            Rows next_rows = cur_rows;
            typename F::Lane next{};
            if (more) {
                if (nq != q) next_rows = rows_of(nq);
                next = F::load(next_rows.lo + ns * F::kBlockBytes, next_rows.hi + ns * F::kBlockBytes, t);
            }
            tiles_dot(cur, s);
            if (ns == 0) {
                flush(cur_rows);
                zero();
            }
            if (!more) break;
            q = nq, s = ns, cur_rows = next_rows, cur = next;
        }
    }
}

// hs[p] = the split row of h[p] = SwiGLU(g[p], u[p]) (gu[p]: n_ff gate values,
// then n_ff up values), one block a pair.
__global__ void expert_swiglu_split_kernel(const float* __restrict__ gu, int64_t n_ff,
                                           const int32_t* __restrict__ experts, int64_t n_exp, const float* gs,
                                           int64_t n_gs, const float* us, int64_t n_us, float limit,
                                           int8_t* __restrict__ hs) {
    wait_for_inputs();
    const int64_t p = blockIdx.x, e = experts[p];
    const bool live = e >= 0 && e < n_exp;  // see expert_split_mma_kernel: a dropped pair's h is zero
    const float* g = gu + p * 2 * n_ff;
    const float* u = g + n_ff;
    int8_t* row = hs + p * split_row_bytes(n_ff);
    const int64_t chunks = n_ff / 8;
    for (int64_t c0 = 0; c0 < chunks; c0 += blockDim.x) {
        const int64_t c = c0 + threadIdx.x;
        const bool valid = c < chunks;
        float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        if (valid && live)
#pragma unroll
            for (int i = 0; i < 8; ++i) v[i] = expert_swiglu_value(g[8 * c + i], u[8 * c + i], e, gs, n_gs, us, n_us, limit);
        split_values8(v, n_ff, c, valid, row);
    }
}

// Launches an expert kernel of nw warps with smem bytes of dynamic shared
// memory. Above 48 KiB a kernel needs the opt-in, once per kernel: kept in a
// list by address, since the kernels of one signature share one type (a
// static per template instantiation would set only the first of them).
template <class Kernel, class... Args>
void launch_expert_kernel(Kernel kernel, dim3 grid, int nw, size_t smem, cudaStream_t stream, Args... args) {
    if (smem > 48 * 1024) {
        static std::mutex mu;
        static std::vector<const void*> allowed;
        const void* key = reinterpret_cast<const void*>(kernel);
        const std::lock_guard<std::mutex> lock(mu);
        if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
            check(cudaFuncSetAttribute(key, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
                  "allowing an expert kernel its shared memory");
            allowed.push_back(key);
        }
    }
    launch(kernel, grid, 32 * nw, smem, stream, args...);
}

template <class F>
void launch_products(int nw, int wk, int64_t n_blocks_y, cudaStream_t stream, const uint8_t* w0, const uint8_t* w1,
                     size_t matrix_bytes, size_t row_bytes, int64_t k, int64_t n_rows, int64_t n_exp,
                     const int32_t* tiles, const int32_t* pair_of_row, const int32_t* experts, int x_div,
                     const int8_t* xs, int64_t ld_xs, float* y, int64_t ld_y) {
    const size_t smem = stage_smem<F>(nw);
    const int64_t rows_a_block = int64_t(nw / wk) * kMmaRows;
    const int64_t row_blocks = (n_rows + rows_a_block - 1) / rows_a_block;
    const dim3 grid(unsigned(row_blocks * (w1 ? 2 : 1)), unsigned(n_blocks_y));
    auto go = [&](auto kernel) {
        launch_expert_kernel(kernel, grid, nw, smem, stream, w0, w1, matrix_bytes, row_bytes, k, n_rows, n_exp, tiles,
                             pair_of_row, experts, x_div, xs, ld_xs, y, ld_y);
    };
    if (nw == 8) {
        if (wk == 8) go(expert_split_mma_kernel<F, 8, 8>);
        else if (wk == 4) go(expert_split_mma_kernel<F, 8, 4>);
        else if (wk == 2) go(expert_split_mma_kernel<F, 8, 2>);
        else go(expert_split_mma_kernel<F, 8, 1>);
    } else if (nw == 4) {
        if (wk >= 4) go(expert_split_mma_kernel<F, 4, 4>);
        else if (wk == 2) go(expert_split_mma_kernel<F, 4, 2>);
        else go(expert_split_mma_kernel<F, 4, 1>);
    } else {
        if (wk >= 2) go(expert_split_mma_kernel<F, 2, 2>);
        else go(expert_split_mma_kernel<F, 2, 1>);
    }
}

// DS4_CUDA_MOE_MMA_WK="G,D": warps along a row (1, 2, 4 or 8; 0: as many
// as the row has super-blocks) in the gate+up (G) and down (D) products, an
// A/B switch, read once.
std::pair<int, int> mma_warps_along_k() {
    static const std::pair<int, int> wk = [] {
        const char* v = std::getenv("DS4_CUDA_MOE_MMA_WK");
        int g = 0, d = 0;
        if (!v || std::sscanf(v, "%d,%d", &g, &d) != 2) g = 0, d = 0;
        return std::pair<int, int>{std::clamp(g, 0, 8), std::clamp(d, 0, 8)};
    }();
    return wk;
}

template <class F>
void launch_stream(int nw, int64_t n_blocks_y, cudaStream_t stream, const uint8_t* w0, const uint8_t* w1,
                   size_t matrix_bytes, size_t row_bytes, int64_t k, int64_t n_rows, int64_t n_exp,
                   const int32_t* tiles, const int32_t* pair_of_row, const int32_t* experts, int x_div,
                   const int8_t* xs, int64_t ld_xs, float* y, int64_t ld_y) {
    const size_t smem = stage_smem<F>(nw);
    // Row groups a warp: about two waves of 16 warps an SM over the launched
    // tiles (the values do not depend on it).
    static const int sms = [] {
        int dev = 0, n = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
            return 132;
        return n;
    }();
    const int64_t n_groups = (n_rows + kMmaRows - 1) / kMmaRows * (w1 ? 2 : 1);
    const int64_t want_warps = int64_t(sms) * 32;
    // Row groups a warp (A/B), read once.
    static const int asked_gpw = int(std::clamp<long long>(env_int("DS4_CUDA_MOE_MMA_GPW", 0), 0, 64));
    const int gpw = asked_gpw > 0 ? asked_gpw : int(std::clamp<int64_t>(n_groups * n_blocks_y / want_warps, 1, 16));
    const dim3 grid(unsigned((n_groups + int64_t(nw) * gpw - 1) / (int64_t(nw) * gpw)), unsigned(n_blocks_y));
    auto go = [&](auto kernel) {
        launch_expert_kernel(kernel, grid, nw, smem, stream, w0, w1, matrix_bytes, row_bytes, k, n_rows, n_exp, tiles,
                             pair_of_row, experts, x_div, xs, ld_xs, y, ld_y, gpw);
    };
    if (nw == 8) go(expert_split_mma_stream_kernel<F, 8>);
    else if (nw == 4) go(expert_split_mma_stream_kernel<F, 4>);
    else go(expert_split_mma_stream_kernel<F, 2>);
}

// DS4_CUDA_MOE_MMA_STREAM=1: the streaming kernel (A/B), read once.
bool mma_stream() {
    static const bool on = env_switch("DS4_CUDA_MOE_MMA_STREAM", false);
    return on;
}

// DS4_CUDA_MOE_MMA_WARPS=2|4|8: warps a block (A/B; default 8), read once.
int mma_block_warps() {
    static const int nw = [] {
        const long long n = env_int("DS4_CUDA_MOE_MMA_WARPS", 8);
        return n == 2 || n == 4 ? int(n) : 8;
    }();
    return nw;
}

}  // namespace

bool expert_mma_supported(GgmlType type, const void* base, size_t matrix_bytes, size_t row_bytes, int64_t k) {
    if (k % 256 != 0 || k <= 0 || reinterpret_cast<uintptr_t>(base) % 16 != 0 || matrix_bytes % 16 != 0) return false;
    if (type == GgmlType::Q4_K) return row_bytes == size_t(k / 256) * Q4kFormat::kBlockBytes;
    if (type == GgmlType::Q6_K) return row_bytes == size_t(k / 256) * Q6kFormat::kBlockBytes;
    return false;
}

void expert_products_split_mma(GgmlType type, const uint8_t* w0, const uint8_t* w1, size_t matrix_bytes,
                               size_t row_bytes, int64_t k, int64_t n_rows, int64_t n_exp, const int32_t* tiles,
                               int64_t n_tiles, const int32_t* pair_of_row, const int32_t* experts, int64_t n_pairs,
                               int x_div, const int8_t* xs, float* y, int64_t ld_y, cudaStream_t stream) {
    const int64_t n_blocks = tiles ? n_tiles : n_pairs;
    if (n_rows <= 0 || n_blocks <= 0) return;
    if (n_blocks > 65535) throw Error("expert_products_split_mma: too many tiles (" + std::to_string(n_blocks) + ").");
    // Warps along a row: as many as there are super-blocks, up to all of
    // them, or what DS4_CUDA_MOE_MMA_WK asks (A/B).
    const int64_t n_sb = k / 256;
    const int asked = w1 ? mma_warps_along_k().first : mma_warps_along_k().second;
    const int64_t most = asked > 0 ? std::min<int64_t>(asked, n_sb) : n_sb;
    const int nw = mma_block_warps();
    const int wk = std::min(nw, most >= 8 ? 8 : most >= 4 ? 4 : most >= 2 ? 2 : 1);
    const int64_t ld_xs = split_activation_bytes(k);
    auto go = [&](auto format) {
        using F = decltype(format);
        if (mma_stream())
            launch_stream<F>(nw, n_blocks, stream, w0, w1, matrix_bytes, row_bytes, k, n_rows, n_exp, tiles,
                             pair_of_row, experts, x_div, xs, ld_xs, y, ld_y);
        else
            launch_products<F>(nw, wk, n_blocks, stream, w0, w1, matrix_bytes, row_bytes, k, n_rows, n_exp, tiles,
                               pair_of_row, experts, x_div, xs, ld_xs, y, ld_y);
    };
    if (type == GgmlType::Q4_K) go(Q4kFormat{});
    else if (type == GgmlType::Q6_K) go(Q6kFormat{});
    else throw Error("expert_products_split_mma: no product for " + std::string(ggml_type_name(type)) + " rows.");
    check_launch(mma_stream() ? "expert_split_mma_stream_kernel" : "expert_split_mma_kernel");
}

void expert_swiglu_split(const float* gu, int64_t n_ff, const int32_t* experts, int64_t n_exp, int64_t n_pairs,
                         const float* gate_scale, int64_t n_gs, const float* up_scale, int64_t n_us, float limit,
                         int8_t* hs, cudaStream_t stream) {
    if (n_pairs <= 0) return;
    if (n_ff % 256 != 0 || n_pairs > INT32_MAX) throw Error("expert_swiglu_split: rows of whole 256-value blocks only.");
    launch(expert_swiglu_split_kernel, unsigned(n_pairs), 128, 0, stream, gu, n_ff, experts, n_exp, gate_scale, n_gs,
           up_scale, n_us, limit, hs);
    check_launch("expert_swiglu_split_kernel");
}

}  // namespace ds4::cuda

// The tile list of a grouped MoE product, built on the device from the
// routing: the pairs sorted by expert (row r of the grouped products holds
// pair pair_of_row[r], token token_of_row[r], expert expert_of_row[r]) and
// one (expert, first row, rows) entry per kGemmTileTokens rows of an expert.
// Built on the host before, it cost a download of the routing and a wait
// for the stream in every MoE layer of a prefill step, and kept decode
// batches off the tensor cores (a recorded step cannot wait on the host).
//
// Rows of one expert come in no fixed order (atomics hand out the ranks):
// every product, the SwiGLU and the scatter back to pair order treat a row
// alone, so the order changes no value.
#include <algorithm>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"

namespace ds4::cuda {
namespace {

constexpr int kThreads = 1024;

__global__ void __launch_bounds__(kThreads) moe_tile_list_kernel(const int32_t* __restrict__ experts, int n_pairs,
                                                                 int n_exp, int n_used, int max_tiles,
                                                                 int32_t* __restrict__ token_of_row,
                                                                 int32_t* __restrict__ pair_of_row,
                                                                 int32_t* __restrict__ expert_of_row,
                                                                 int32_t* __restrict__ tiles) {
    extern __shared__ int sm[];
    int* count = sm;              // pairs per expert, then the next free rank
    int* first_row = sm + n_exp;  // exclusive prefix sums of count
    int* first_tile = sm + 2 * n_exp;
    wait_for_inputs();
    const int tid = int(threadIdx.x);
    for (int e = tid; e < n_exp; e += kThreads) count[e] = 0;
    __syncthreads();
    // The routing kernels write ids in [0, n_exp); anything else is dropped
    // rather than written out of bounds (its pair's output stays zero).
    for (int p = tid; p < n_pairs; p += kThreads) {
        const int e = experts[p];
        if (e >= 0 && e < n_exp) atomicAdd(&count[e], 1);
    }
    __syncthreads();
    if (tid == 0) {
        // A few hundred experts at most: one thread's running sums.
        int rows = 0, ts = 0;
        for (int e = 0; e < n_exp; ++e) {
            first_row[e] = rows;
            first_tile[e] = ts;
            rows += count[e];
            ts += (count[e] + int(kGemmTileTokens) - 1) / int(kGemmTileTokens);
        }
    }
    __syncthreads();
    // Tiles of every expert, then idle ones (0 rows) up to max_tiles.
    for (int e = tid; e < n_exp; e += kThreads) {
        const int c = count[e];
        for (int j = 0; j * int(kGemmTileTokens) < c; ++j) {
            int32_t* t = tiles + 3 * (first_tile[e] + j);
            t[0] = e;
            t[1] = first_row[e] + j * int(kGemmTileTokens);
            t[2] = min(int(kGemmTileTokens), c - j * int(kGemmTileTokens));
        }
    }
    const int used_tiles = first_tile[n_exp - 1] + (count[n_exp - 1] + int(kGemmTileTokens) - 1) / int(kGemmTileTokens);
    for (int i = used_tiles + tid; i < max_tiles; i += kThreads) {
        tiles[3 * i] = 0;
        tiles[3 * i + 1] = 0;
        tiles[3 * i + 2] = 0;
    }
    __syncthreads();  // every count read above before it becomes a rank counter
    for (int e = tid; e < n_exp; e += kThreads) count[e] = 0;
    __syncthreads();
    for (int p = tid; p < n_pairs; p += kThreads) {
        const int e = experts[p];
        if (e < 0 || e >= n_exp) continue;
        const int r = first_row[e] + atomicAdd(&count[e], 1);
        token_of_row[r] = p / n_used;
        pair_of_row[r] = p;
        expert_of_row[r] = e;
    }
}

}  // namespace

int64_t moe_max_tiles(int64_t n_pairs, int64_t n_exp) {
    return std::min(n_pairs, n_exp) + (n_pairs + kGemmTileTokens - 1) / kGemmTileTokens;
}

void moe_tile_list(const int32_t* experts, int64_t n_pairs, int64_t n_exp, int n_used, int32_t* token_of_row,
                   int32_t* pair_of_row, int32_t* expert_of_row, int32_t* tiles, cudaStream_t stream) {
    if (n_pairs <= 0) return;
    if (n_exp <= 0 || n_exp > kMoeTileMaxExperts || n_pairs > INT32_MAX / 2)
        throw Error("CUDA MoE tile list: " + std::to_string(n_exp) + " experts, " + std::to_string(n_pairs) +
                    " pairs.");
    const int max_tiles = int(moe_max_tiles(n_pairs, n_exp));
    launch(moe_tile_list_kernel, dim3(1), dim3(kThreads), size_t(3 * n_exp) * sizeof(int), stream, experts,
           int(n_pairs), int(n_exp), n_used, max_tiles, token_of_row, pair_of_row, expert_of_row, tiles);
    check_launch("moe_tile_list_kernel");
}

}  // namespace ds4::cuda

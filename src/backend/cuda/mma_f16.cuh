// The f16 tensor-core instructions of the prefill products (mma_gemm.cu,
// gemm_frag.cu): f32 accumulation of m16n8k16 tiles, and ldmatrix.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace ds4::cuda {
namespace {

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __half* p) {
    const unsigned a = unsigned(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

// c += a (16 x 16, rows = weight rows) * b (16 x 8, columns = tokens).
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The token tile of a prefill product's block (grid y): entry blockIdx.y
// (matrix, first token, tokens) of `tiles`, or without tiles matrix 0 and
// tokens [tokens * blockIdx.y, ...) of n_tok. A tile of no tokens is an idle
// entry of a list sized on the host (moe_tile_list): the block does nothing.
struct GemmTile {
    int64_t mat, t0, nt;
};
__device__ __forceinline__ GemmTile gemm_tile(const int32_t* tiles, int64_t n_tok, int tokens) {
    if (tiles) return {tiles[3 * blockIdx.y], tiles[3 * blockIdx.y + 1], tiles[3 * blockIdx.y + 2]};
    const int64_t t0 = int64_t(blockIdx.y) * tokens;
    return {0, t0, min(int64_t(tokens), n_tok - t0)};
}

}  // namespace
}  // namespace ds4::cuda

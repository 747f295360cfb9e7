// Q4_K gate and up rows of the routed experts, four row indices to a warp
// and 32 weights to a lane per 256-element step, for the gate+up kernels
// (moe_decode.cu per pair, moe_grouped.cu grouped by expert).
//
// Why: dot_step_n gives each lane 8 weights of a step, so every lane decodes
// its sub-block pair's scales and mins (d, dmin, the 6-bit fields) for 8
// weights; with the activations' sums and the combine that was ~10
// instructions per weight and pair, and an 8-sequence step spent 104 us a
// layer in gate+up on the H200 (2026-12-02), issue-bound. Here a lane
// decodes them once for 32 weights (two uint4 loads: the block head and its
// 16 quant bytes), and a row's sum is over 8 lanes (three shuffles).
//
// Lane l serves row index l >> 3 of the warp's four; i = l & 7 takes quant
// bytes 16 i .. 16 i + 15 of the step: sub-block pair p = i >> 1, h = i & 1;
// byte b's low nibble is element 64 p + 16 h + b (sub-block 2 p), its high
// nibble element 64 p + 32 + 16 h + b (sub-block 2 p + 1). The rows are
// staged in shared memory (16-byte aligned, whole rows).
//
// Float semantics as dot_step_n's: 16 products summed per half, scaled by
// the sub-block scale, minus min times the activations' sum; only the
// summation order differs (the suite's 1e-5 bound against the CPU). Every
// (row, activation) product is the same expression whatever NA is, so a
// pair's result does not depend on which pairs share its warp.
#pragma once

#include "backend/cuda/quant_decode.cuh"
#include "backend/cuda/warp_dot.cuh"

namespace ds4::cuda {
namespace {

constexpr int kWideRows = 4;  // row indices per warp

// acc[0][a] += gate . xs[a], acc[1][a] += up . xs[a] over step s (this lane's share).
template <int NA>
__device__ __forceinline__ void q4k_gate_up_wide_step(const uint8_t* gate, const uint8_t* up, int64_t s,
                                                      const float* const (&xs)[NA], int i, float (&acc)[2][NA]) {
    const int p = i >> 1, h = i & 1;
    float4 xl[NA][4], xh[NA][4];
    float sl[NA], sh[NA];
#pragma unroll
    for (int a = 0; a < NA; ++a) {
        const float* xb = xs[a] + s * 256 + 64 * p + 16 * h;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            xl[a][c] = ldx4(xb + 4 * c);
            xh[a][c] = ldx4(xb + 32 + 4 * c);
        }
        sl[a] = 0.0f;
        sh[a] = 0.0f;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            sl[a] += (xl[a][c].x + xl[a][c].y) + (xl[a][c].z + xl[a][c].w);
            sh[a] += (xh[a][c].x + xh[a][c].y) + (xh[a][c].z + xh[a][c].w);
        }
    }
    const uint8_t* const rows[2] = {gate, up};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const uint8_t* blk = rows[r] + s * 144;
        const uint4 head = *reinterpret_cast<const uint4*>(blk);
        const uint4 q = *reinterpret_cast<const uint4*>(blk + 16 + 16 * i);
        const auto [a0, b0, a1, b1] = q4k_factors(head, p, small_u2f);
        const uint32_t w[4] = {q.x, q.y, q.z, q.w};
        float lo[16], hi[16];
#pragma unroll
        for (int c = 0; c < 4; ++c)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                lo[4 * c + e] = small_u2f((w[c] >> (8 * e)) & 0xFu);
                hi[4 * c + e] = small_u2f((w[c] >> (8 * e + 4)) & 0xFu);
            }
#pragma unroll
        for (int a = 0; a < NA; ++a) {
            float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                s0 += lo[4 * c] * xl[a][c].x + lo[4 * c + 1] * xl[a][c].y + lo[4 * c + 2] * xl[a][c].z +
                      lo[4 * c + 3] * xl[a][c].w;
                s1 += hi[4 * c] * xh[a][c].x + hi[4 * c + 1] * xh[a][c].y + hi[4 * c + 2] * xh[a][c].z +
                      hi[4 * c + 3] * xh[a][c].w;
            }
            acc[r][a] += (a0 * s0 - b0 * sl[a]) + (a1 * s1 - b1 * sh[a]);
        }
    }
}

// acc[t] += row . x[t] over step s for the nt tokens of a tile (this lane's
// share, i = lane & 7 as above): the row's 32 weights decoded once, then each
// token's 32 activations read and summed as in q4k_gate_up_wide_step, so a
// token's sum is the same expression whatever tile it is in (or NT).
template <int NT>
__device__ __forceinline__ void q4k_row_wide_step(const uint8_t* row, int64_t s, const float* __restrict__ x,
                                                  int64_t ld_x, int nt, int i, float (&acc)[NT]) {
    const int p = i >> 1, h = i & 1;
    const uint8_t* blk = row + s * 144;
    const uint4 head = *reinterpret_cast<const uint4*>(blk);
    const uint4 q = *reinterpret_cast<const uint4*>(blk + 16 + 16 * i);
    const auto [a0, b0, a1, b1] = q4k_factors(head, p, small_u2f);
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    float lo[16], hi[16];
#pragma unroll
    for (int c = 0; c < 4; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            lo[4 * c + e] = small_u2f((w[c] >> (8 * e)) & 0xFu);
            hi[4 * c + e] = small_u2f((w[c] >> (8 * e + 4)) & 0xFu);
        }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        if (NT > 1 && t >= nt) break;
        const float* xb = x + t * ld_x + s * 256 + 64 * p + 16 * h;
        float4 xl[4], xh[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            xl[c] = ldx4(xb + 4 * c);
            xh[c] = ldx4(xb + 32 + 4 * c);
        }
        float sl = 0.0f, sh = 0.0f, s0 = 0.0f, s1 = 0.0f;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            sl += (xl[c].x + xl[c].y) + (xl[c].z + xl[c].w);
            sh += (xh[c].x + xh[c].y) + (xh[c].z + xh[c].w);
        }
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            s0 += lo[4 * c] * xl[c].x + lo[4 * c + 1] * xl[c].y + lo[4 * c + 2] * xl[c].z + lo[4 * c + 3] * xl[c].w;
            s1 += hi[4 * c] * xh[c].x + hi[4 * c + 1] * xh[c].y + hi[4 * c + 2] * xh[c].z + hi[4 * c + 3] * xh[c].w;
        }
        acc[t] += (a0 * s0 - b0 * sl) + (a1 * s1 - b1 * sh);
    }
}

// The sum over the 8 lanes of a row index (lanes 8 g .. 8 g + 7), in every one of them.
__device__ __forceinline__ float row8_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 4);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v;
}

// Stages the warp's gate and up rows r0 .. r0 + n_here - 1 (n_here <= 4) into
// buf (8 rows of n16 16-byte chunks: gate 0..3, up 4..7) and points gate/up
// at this lane's row index (the last row again past n_here; not stored).
__device__ __forceinline__ void q4k_wide_stage(uint4* buf, const uint8_t* gw, const uint8_t* uw, size_t off, int n16,
                                               int n_here, int lane, const uint8_t*& gate, const uint8_t*& up) {
    warp_stage(buf, reinterpret_cast<const uint4*>(gw + off), n16 * n_here, lane);
    warp_stage(buf + kWideRows * n16, reinterpret_cast<const uint4*>(uw + off), n16 * n_here, lane);
    warp_stage_wait();
    const int g = lane >> 3, gr = g < n_here ? g : n_here - 1;
    gate = reinterpret_cast<const uint8_t*>(buf + gr * n16);
    up = reinterpret_cast<const uint8_t*>(buf + (kWideRows + gr) * n16);
}

// Warps a block of the wide kernels, per pair and grouped alike.
constexpr int kWideWarps = 4;
// Whether the wide kernels take these Q4_K gate/up matrices: whole rows
// staged in 16-byte chunks, within 48 KiB. One rule for both kernels, so a
// pair's products take the same expression per pair and grouped by expert.
inline bool q4k_wide_usable(const uint8_t* gate, const uint8_t* up, size_t matrix_bytes, size_t row_bytes) {
    return stage_bytes(gate, up, matrix_bytes, row_bytes, size_t(2 * kWideRows) * kWideWarps) != 0;
}

}  // namespace
}  // namespace ds4::cuda

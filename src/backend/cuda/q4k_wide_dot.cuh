// Q4_K rows, four row indices to a warp and 32 weights to a lane per
// 256-element step: the gate+up kernels of the routed experts (moe_decode.cu
// per pair, moe_grouped.cu grouped by expert) and the lane layout of the
// split kernels (split_dot.cuh). (A dense matvec in this layout was slower
// at every batch size: 205 vs 225 t/s at one sequence, 486 vs 804 at 8,
// H200, 2026-12-04: four rows a warp left too few warps in flight.)
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
// nibble element 64 p + 32 + 16 h + b (sub-block 2 p + 1). The gate+up
// kernels stage their rows in shared memory (16-byte aligned, whole rows).
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

// This lane's 32 activations of step s (xs: the row), as four float4 of
// each sub-block half, and their two sums of 16.
struct Q4kWideActs {
    float4 lo[4], hi[4];
    float s_lo, s_hi;
};
__device__ __forceinline__ Q4kWideActs q4k_wide_acts(const float* x, int64_t s, int i) {
    const int p = i >> 1, h = i & 1;
    const float* xb = x + s * 256 + 64 * p + 16 * h;
    Q4kWideActs a;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        a.lo[c] = ldx4(xb + 4 * c);
        a.hi[c] = ldx4(xb + 32 + 4 * c);
    }
    a.s_lo = 0.0f;
    a.s_hi = 0.0f;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        a.s_lo += (a.lo[c].x + a.lo[c].y) + (a.lo[c].z + a.lo[c].w);
        a.s_hi += (a.hi[c].x + a.hi[c].y) + (a.hi[c].z + a.hi[c].w);
    }
    return a;
}

// This lane's 32 weights of step s of a row, decoded once: the nibbles as
// floats and the sub-block pair's factors.
struct Q4kWideWeights {
    float lo[16], hi[16];
    Q4kFactors f;
};
__device__ __forceinline__ Q4kWideWeights q4k_wide_weights(const uint8_t* row, int64_t s, int i) {
    const uint8_t* blk = row + s * 144;
    const uint4 head = *reinterpret_cast<const uint4*>(blk);
    const uint4 q = *reinterpret_cast<const uint4*>(blk + 16 + 16 * i);
    Q4kWideWeights w;
    w.f = q4k_factors(head, i >> 1, small_u2f);
    const uint32_t b[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int c = 0; c < 4; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            w.lo[4 * c + e] = small_u2f((b[c] >> (8 * e)) & 0xFu);
            w.hi[4 * c + e] = small_u2f((b[c] >> (8 * e + 4)) & 0xFu);
        }
    return w;
}

// This lane's share of row . x over the step: 16 products summed per half,
// scaled by the sub-block scale, minus min times the activations' sum.
__device__ __forceinline__ float q4k_wide_dot(const Q4kWideWeights& w, const Q4kWideActs& x) {
    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        s0 += w.lo[4 * c] * x.lo[c].x + w.lo[4 * c + 1] * x.lo[c].y + w.lo[4 * c + 2] * x.lo[c].z +
              w.lo[4 * c + 3] * x.lo[c].w;
        s1 += w.hi[4 * c] * x.hi[c].x + w.hi[4 * c + 1] * x.hi[c].y + w.hi[4 * c + 2] * x.hi[c].z +
              w.hi[4 * c + 3] * x.hi[c].w;
    }
    return (w.f.a0 * s0 - w.f.b0 * x.s_lo) + (w.f.a1 * s1 - w.f.b1 * x.s_hi);
}

// acc[0][a] += gate . xs[a], acc[1][a] += up . xs[a] over step s (this lane's share).
template <int NA>
__device__ __forceinline__ void q4k_gate_up_wide_step(const uint8_t* gate, const uint8_t* up, int64_t s,
                                                      const float* const (&xs)[NA], int i, float (&acc)[2][NA]) {
    Q4kWideActs x[NA];
#pragma unroll
    for (int a = 0; a < NA; ++a) x[a] = q4k_wide_acts(xs[a], s, i);
    const uint8_t* const rows[2] = {gate, up};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const Q4kWideWeights w = q4k_wide_weights(rows[r], s, i);
#pragma unroll
        for (int a = 0; a < NA; ++a) acc[r][a] += q4k_wide_dot(w, x[a]);
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
// Whether Q4_K rows at base + m * matrix_bytes + r * row_bytes take the wide
// lane layout's 16-byte loads (whole 256-value blocks, 16-byte aligned).
inline bool q4k_wide_rows_aligned(int64_t k, const void* base, size_t matrix_bytes, size_t row_bytes) {
    return k % 256 == 0 && reinterpret_cast<uintptr_t>(base) % 16 == 0 && matrix_bytes % 16 == 0 &&
           row_bytes % 16 == 0;
}
// Whether the wide kernels take these Q4_K gate/up matrices: whole rows
// staged in 16-byte chunks, within 48 KiB. One rule for both kernels, so a
// pair's products take the same expression per pair and grouped by expert.
inline bool q4k_wide_usable(const uint8_t* gate, const uint8_t* up, size_t matrix_bytes, size_t row_bytes) {
    return stage_bytes(gate, up, matrix_bytes, row_bytes, size_t(2 * kWideRows) * kWideWarps) != 0;
}

}  // namespace
}  // namespace ds4::cuda

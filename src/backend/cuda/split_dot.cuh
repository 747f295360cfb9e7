// Weight rows times split activations (split_digits.h): the quantizer that
// writes split rows and the per-lane dot step of Q4_K rows, eight lanes to
// a row and 32 weights to a lane per 256-element step (the lane layout of
// q4k_wide_dot.cuh), each group of 4 weights three __dp4a.
//
// Q6_K rows (the down matrices of half of a Q4_K_M file's layers) stay on
// the float kernels: a split Q6_K step (2-byte loads of 210-byte blocks,
// six operations to make four signed 6-bit values) measured 83 us against
// the float kernel's 65 for an 8-sequence step's down (H200, 2026-12-03).
#pragma once

#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/q4k_wide_dot.cuh"
#include "backend/cuda/quant_decode.cuh"
#include "backend/cuda/split_digits.h"

namespace ds4::cuda {
namespace {

// One split row's parts (split_row_bytes(k) bytes from base).
struct SplitRow {
    const int8_t* a0;
    const int8_t* a1;
    const int8_t* a2;
    const float* u;    // k / 32 block units
    const float* s16;  // k / 16 sums of the original values
};
__device__ __forceinline__ SplitRow split_row(const int8_t* base, int64_t k) {
    const float* u = reinterpret_cast<const float*>(base + 3 * k);
    return {base, base + k, base + 2 * k, u, u + k / 32};
}

// Values 8 c .. 8 c + 7 of a row of k (v: zeros where not valid) into the
// split row at out, by the four lanes that hold one 32-element block (lanes
// 4 b .. 4 b + 3 hold chunks 4 b .. 4 b + 3 of some block). Every lane of
// the warp calls it (the shuffles), `valid` false past the row.
__device__ __forceinline__ void split_values8(const float (&v)[8], int64_t k, int64_t c, bool valid, int8_t* out) {
    float amax = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(v[e]));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    // The sum of the 16 values of chunks 2 j, 2 j + 1 (the same float in both lanes).
    const float s8 = ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
    const float o8 = __shfl_xor_sync(0xffffffffu, s8, 1);
    const float s16 = (c & 1) ? o8 + s8 : s8 + o8;
    if (!valid) return;
    const float inv = amax > 0.0f ? kSplitScale / amax : 0.0f;
    uint32_t w0[2] = {0u, 0u}, w1[2] = {0u, 0u}, w2[2] = {0u, 0u};
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        const SplitDigits d = split_digits(split_value(v[e], inv));
        const int sh = 8 * (e & 3);
        w0[e >> 2] |= (uint32_t(d.a0) & 0xFFu) << sh;
        w1[e >> 2] |= (uint32_t(d.a1) & 0xFFu) << sh;
        w2[e >> 2] |= (uint32_t(d.a2) & 0xFFu) << sh;
    }
    *reinterpret_cast<uint2*>(out + 8 * c) = make_uint2(w0[0], w0[1]);
    *reinterpret_cast<uint2*>(out + k + 8 * c) = make_uint2(w1[0], w1[1]);
    *reinterpret_cast<uint2*>(out + 2 * k + 8 * c) = make_uint2(w2[0], w2[1]);
    float* u = reinterpret_cast<float*>(out + 3 * k);
    if ((c & 3) == 0) u[c / 4] = amax / kSplitScale;
    if ((c & 1) == 0) u[k / 32 + c / 2] = s16;
}
// The same, elements 8 c .. 8 c + 7 of x.
__device__ __forceinline__ void split_chunk8(const float* __restrict__ x, int64_t k, int64_t c, bool valid,
                                             int8_t* out) {
    float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (valid) {
        const float4 a = *reinterpret_cast<const float4*>(x + 8 * c);
        const float4 b = *reinterpret_cast<const float4*>(x + 8 * c + 4);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    }
    split_values8(v, k, c, valid, out);
}

// Q4_K: acc[m] += rows[m] . x over step s, this lane's 32 weights. i = lane
// & 7: quant bytes 16 i .. 16 i + 15 of the step, sub-block pair p = i >> 1,
// h = i & 1 (low nibbles: elements 64 p + 16 h + 0..15 of sub-block 2 p;
// high nibbles the same of 2 p + 1). Rows 16-byte aligned. A sub-block's
// share is d * scale * u * (the integer dot) - dmin * min * (sum of its 16
// activations), the CPU's expression regrouped.
template <int NM>
__device__ __forceinline__ void q4k_split_step(const uint8_t* const (&rows)[NM], int64_t s, const SplitRow& x, int i,
                                               float (&acc)[NM]) {
    const int p = i >> 1, h = i & 1;
    const int64_t e_lo = s * 256 + 64 * p + 16 * h, e_hi = e_lo + 32;
    const uint4 l0 = *reinterpret_cast<const uint4*>(x.a0 + e_lo), h0 = *reinterpret_cast<const uint4*>(x.a0 + e_hi);
    const uint4 l1 = *reinterpret_cast<const uint4*>(x.a1 + e_lo), h1 = *reinterpret_cast<const uint4*>(x.a1 + e_hi);
    const uint4 l2 = *reinterpret_cast<const uint4*>(x.a2 + e_lo), h2 = *reinterpret_cast<const uint4*>(x.a2 + e_hi);
    const float u_lo = x.u[e_lo / 32], u_hi = x.u[e_hi / 32];
    const float s_lo = x.s16[e_lo / 16], s_hi = x.s16[e_hi / 16];
    const uint32_t al0[4] = {l0.x, l0.y, l0.z, l0.w}, ah0[4] = {h0.x, h0.y, h0.z, h0.w};
    const uint32_t al1[4] = {l1.x, l1.y, l1.z, l1.w}, ah1[4] = {h1.x, h1.y, h1.z, h1.w};
    const uint32_t al2[4] = {l2.x, l2.y, l2.z, l2.w}, ah2[4] = {h2.x, h2.y, h2.z, h2.w};
#pragma unroll
    for (int m = 0; m < NM; ++m) {
        const uint8_t* blk = rows[m] + s * 144;
        const uint4 head = *reinterpret_cast<const uint4*>(blk);
        const uint4 q = *reinterpret_cast<const uint4*>(blk + 16 + 16 * i);
        const auto [a0, b0, a1, b1] = q4k_factors(head, p, [](uint32_t v) { return float(v); });
        const uint32_t w[4] = {q.x, q.y, q.z, q.w};
        int dl0 = 0, dl1 = 0, dl2 = 0, dh0 = 0, dh1 = 0, dh2 = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int lo = int(w[j] & 0x0F0F0F0Fu), hi = int((w[j] >> 4) & 0x0F0F0F0Fu);
            dl0 = __dp4a(lo, int(al0[j]), dl0);
            dl1 = __dp4a(lo, int(al1[j]), dl1);
            dl2 = __dp4a(lo, int(al2[j]), dl2);
            dh0 = __dp4a(hi, int(ah0[j]), dh0);
            dh1 = __dp4a(hi, int(ah1[j]), dh1);
            dh2 = __dp4a(hi, int(ah2[j]), dh2);
        }
        const float dot_lo = u_lo * float(split_join(dl0, dl1, dl2)), dot_hi = u_hi * float(split_join(dh0, dh1, dh2));
        acc[m] += (a0 * dot_lo - b0 * s_lo) + (a1 * dot_hi - b1 * s_hi);
    }
}

}  // namespace
}  // namespace ds4::cuda

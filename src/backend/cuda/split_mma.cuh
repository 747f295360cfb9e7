// The int8 tensor-core pieces of the split-activation products (split_digits.h)
// shared by the dense decode products (dense_split_mma.cu) and the routed
// experts (moe_split_mma.cu): the mma instructions, and per weight format a
// lane's share of one 256-value super-block of two rows (A's rows g, g + 8)
// and its products with one tile of 8 tokens (B's columns). The lane layout
// and the integer ranges are described at the top of dense_split_mma.cu.
#pragma once

#include <cstdint>

#include <cuda_fp16.h>

#include "backend/cuda/quant_decode.cuh"
#include "backend/cuda/split_digits.h"

namespace ds4::cuda {
namespace {

__device__ __forceinline__ void mma_s8(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                       uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

__device__ __forceinline__ void mma_s8_k16(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a0), "r"(a1), "r"(b0));
#endif
}

// The exact integer dot of three digit sums as a float (see the top).
__device__ __forceinline__ float join_sums(int s0, int s1, int s2) {
    return fmaf(float(s0), float(kSplitBase * kSplitBase), float(s1 * kSplitBase + s2));
}

// One tile of 8 tokens as a lane reads it: its B token's split row and the
// block units of its two output tokens.
struct TokenTile {
    const int8_t* xb;
    const float* xu[2];
};

// A lane's share of one Q4_K super-block of rows g and g + 8: the 16-byte
// heads (d, dmin, scales) and bytes 8 t .. 8 t + 7 of each sub-block pair.
struct Q4kFormat {
    static constexpr size_t kBlockBytes = 144;
    struct Lane {
        uint4 head[2];
        uint2 q[2][4];
    };
    static __device__ __forceinline__ Lane load(const uint8_t* lo, const uint8_t* hi, int t) {
        Lane b;
        b.head[0] = *reinterpret_cast<const uint4*>(lo);
        b.head[1] = *reinterpret_cast<const uint4*>(hi);
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            b.q[0][p] = *reinterpret_cast<const uint2*>(lo + 16 + 32 * p + 8 * t);
            b.q[1][p] = *reinterpret_cast<const uint2*>(hi + 16 + 32 * p + 8 * t);
        }
        return b;
    }
    // acc (rows g, g + 8 x tokens 2 t, 2 t + 1) += super-block s's products.
    static __device__ __forceinline__ void dot(const Lane& w, int64_t s, int64_t k, int t, const TokenTile& x,
                                               float (&acc)[4]) {
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            // Sub-blocks 2 p (low nibbles) and 2 p + 1 (high): scale and min
            // factors of rows g and g + 8.
            const auto f_lo = q4k_factors(w.head[0], p, [](uint32_t v) { return float(v); });
            const auto f_hi = q4k_factors(w.head[1], p, [](uint32_t v) { return float(v); });
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int sh = 4 * half;
                const uint32_t a0 = (w.q[0][p].x >> sh) & 0x0F0F0F0Fu, a1 = (w.q[1][p].x >> sh) & 0x0F0F0F0Fu;
                const uint32_t a2 = (w.q[0][p].y >> sh) & 0x0F0F0F0Fu, a3 = (w.q[1][p].y >> sh) & 0x0F0F0F0Fu;
                const float scale_lo = half ? f_lo.a1 : f_lo.a0, min_lo = half ? f_lo.b1 : f_lo.b0;
                const float scale_hi = half ? f_hi.a1 : f_hi.a0, min_hi = half ? f_hi.b1 : f_hi.b0;
                const int64_t sub = s * 8 + 2 * p + half;  // the sub-block (32 elements) within the row
                const int64_t e = sub * 32 + 8 * t;
                int d0[4] = {0, 0, 0, 0}, d1[4] = {0, 0, 0, 0}, d2[4] = {0, 0, 0, 0};
                const uint2 b0 = *reinterpret_cast<const uint2*>(x.xb + e);
                const uint2 b1 = *reinterpret_cast<const uint2*>(x.xb + k + e);
                const uint2 b2 = *reinterpret_cast<const uint2*>(x.xb + 2 * k + e);
                mma_s8(d0, a0, a1, a2, a3, b0.x, b0.y);
                mma_s8(d1, a0, a1, a2, a3, b1.x, b1.y);
                mma_s8(d2, a0, a1, a2, a3, b2.x, b2.y);
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    // Block unit u and the sub-block's sum of activations (two sums of 16).
                    const float u = x.xu[c][sub];
                    const float2 s16 = *reinterpret_cast<const float2*>(x.xu[c] + k / 32 + 2 * sub);
                    const float sum = s16.x + s16.y;
                    acc[c] += scale_lo * (u * join_sums(d0[c], d1[c], d2[c])) - min_lo * sum;
                    acc[2 + c] += scale_hi * (u * join_sums(d0[2 + c], d1[2 + c], d2[2 + c])) - min_hi * sum;
                }
            }
        }
    }
};

// Four bytes at a 2-byte aligned address.
__device__ __forceinline__ uint32_t load_u32_a2(const uint8_t* p) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
    return uint32_t(h[0]) | (uint32_t(h[1]) << 16);
}

// A lane's share of one Q6_K super-block (ql[128] qh[64] scales[16] d) of
// rows g and g + 8: element 16 b + 4 t + i of each sub-block b (i < 4). In
// half h, quarter j, sub-block b = 8 h + 2 j + m (m: which 16 of the
// quarter's 32): low bits in ql[64 h + 32 (j & 1) + 16 m + ...] (high nibbles
// for j >= 2), high bits in qh[32 h + 16 m + ...] >> 2 j.
struct Q6kFormat {
    static constexpr size_t kBlockBytes = 210;
    struct Lane {
        uint32_t ql[2][8];  // [row][4 h + 2 (j & 1) + m]
        uint32_t qh[2][4];  // [row][2 h + m]
        uint32_t sc[2][4];  // [row]: the 16 int8 scales
        float d[2];
    };
    static __device__ __forceinline__ Lane load(const uint8_t* lo, const uint8_t* hi, int t) {
        Lane b;
        const uint8_t* rows[2] = {lo, hi};
#pragma unroll
        for (int r = 0; r < 2; ++r) {
#pragma unroll
            for (int i = 0; i < 8; ++i) b.ql[r][i] = load_u32_a2(rows[r] + 16 * i + 4 * t);
#pragma unroll
            for (int i = 0; i < 4; ++i) b.qh[r][i] = load_u32_a2(rows[r] + 128 + 16 * i + 4 * t);
#pragma unroll
            for (int i = 0; i < 4; ++i) b.sc[r][i] = load_u32_a2(rows[r] + 192 + 4 * i);
            b.d[r] = __half2float(*reinterpret_cast<const __half*>(rows[r] + 208));
        }
        return b;
    }
    static __device__ __forceinline__ int scale_of(const Lane& w, int r, int b) {
        return int(int8_t(uint8_t(w.sc[r][b >> 2] >> (8 * (b & 3)))));
    }
    static __device__ __forceinline__ uint32_t quants(const Lane& w, int r, int h, int j, int m) {
        const uint32_t low = w.ql[r][4 * h + 2 * (j & 1) + m];
        const uint32_t nib = (j >> 1) ? (low >> 4) & 0x0F0F0F0Fu : low & 0x0F0F0F0Fu;
        const uint32_t high = (w.qh[r][2 * h + m] >> (2 * j)) & 0x03030303u;
        return __vsub4(nib | (high << 4), 0x20202020u);  // bytewise q - 32, signed
    }
    static __device__ __forceinline__ void dot(const Lane& w, int64_t s, int64_t k, int t, const TokenTile& x,
                                               float (&acc)[4]) {
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                // The 32-element activation block 4 h + j: sub-blocks m = 0, 1
                // summed in int32 with their row's scales, per digit.
                int sum[3][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
#pragma unroll
                for (int m = 0; m < 2; ++m) {
                    const int b = 8 * h + 2 * j + m;
                    const uint32_t a0 = quants(w, 0, h, j, m), a1 = quants(w, 1, h, j, m);
                    const int sc_lo = scale_of(w, 0, b), sc_hi = scale_of(w, 1, b);
                    const int64_t e = s * 256 + 16 * b + 4 * t;
#pragma unroll
                    for (int dg = 0; dg < 3; ++dg) {
                        int d[4] = {0, 0, 0, 0};
                        mma_s8_k16(d, a0, a1, *reinterpret_cast<const uint32_t*>(x.xb + dg * k + e));
                        sum[dg][0] += sc_lo * d[0];
                        sum[dg][1] += sc_lo * d[1];
                        sum[dg][2] += sc_hi * d[2];
                        sum[dg][3] += sc_hi * d[3];
                    }
                }
                const int64_t unit = s * 8 + 4 * h + j;
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    const float v = fmaf(float(sum[0][c]), float(kSplitBase * kSplitBase),
                                         fmaf(float(sum[1][c]), float(kSplitBase), float(sum[2][c])));
                    acc[c] += w.d[c >> 1] * (x.xu[c & 1][unit] * v);
                }
            }
    }
};

}  // namespace
}  // namespace ds4::cuda

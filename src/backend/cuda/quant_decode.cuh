// Device-side decoding of ggml blocks, shared by every kernel that reads
// quantized weights (matvec, dequantize, the fused MoE decode): per-element
// decoders (the same expressions as quant/scalar_*.cpp), block layouts, a
// lane's share of a row dot product, and the host-side type dispatch.
//
// Everything is in an anonymous namespace on purpose: without relocatable
// device code a __device__ symbol (the IQ2_XXS codebook) is visible only in
// its own translation unit, so each .cu file including this header has its
// own copy and uploads it once (upload_decode_tables, called from
// cuda::init_quant_tables).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "gguf/ggml_type.h"
#include "quant/iq2_xxs_grid.h"

namespace ds4::cuda {
namespace {

__device__ uint64_t g_iq2xxs_grid[256];
__device__ const int8_t g_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                              1,    13,   25,  38,  53,  69,  89,  113};

// Blocks carry no alignment promise: read multi-byte fields byte by byte.
__device__ __forceinline__ uint16_t u16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
__device__ __forceinline__ uint32_t u32(const uint8_t* p) {
    return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
__device__ __forceinline__ float half_at(const uint8_t* p) { return __half2float(__ushort_as_half(u16(p))); }

// Q4_K / Q5_K 6-bit scale and min of sub-block j (quant/block_layouts.h).
__device__ __forceinline__ void k_scale_min(int j, const uint8_t* q, int& sc, int& m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// k_scale_min over a byte accessor (scales already in registers).
template <class Byte>
__device__ __forceinline__ void k_scale_min_of(int j, Byte q, int& sc, int& m) {
    if (j < 4) {
        sc = q(j) & 63;
        m = q(j + 4) & 63;
    } else {
        sc = (q(j + 4) & 0xF) | ((q(j - 4) >> 6) << 4);
        m = (q(j + 4) >> 4) | ((q(j) >> 6) << 4);
    }
}

// The 6-bit scales (scp) and mins (mp) of Q4_K sub-blocks 2 p and 2 p + 1,
// low byte first, from the block's first 16 bytes (head.x: d and dmin,
// head.y..w: scales[12]); k_scale_min's rule for a pair at once, without
// branches (p differs between the lanes of a warp): as 16-bit words s[i]
// of scales, the pair is s[p] & 0x3f3f, s[p + 2] & 0x3f3f for p < 2, and
// the low nibbles of s[p + 2] with the top bits of s[p - 2] and s[p] after.
__device__ __forceinline__ void q4k_scale_pair(uint4 head, int p, uint32_t& scp, uint32_t& mp) {
    const int sh = 16 * (p & 1);
    const uint32_t y = (head.y >> sh) & 0xFFFFu, z = (head.z >> sh) & 0xFFFFu, w = (head.w >> sh) & 0xFFFFu;
    const bool low = p < 2;
    scp = low ? (y & 0x3f3fu) : ((w & 0x0f0fu) | ((y & 0xc0c0u) >> 2));
    mp = low ? (z & 0x3f3fu) : (((w >> 4) & 0x0f0fu) | ((z & 0xc0c0u) >> 2));
}

// The factors of Q4_K sub-blocks 2 p and 2 p + 1 from the block's first 16
// bytes: a0 = d * scale(2 p), b0 = dmin * min(2 p), a1 and b1 likewise for
// 2 p + 1 (d, dmin: head.x's halves). `cvt` turns a 6-bit field into a
// float; every form used is exact, and each kernel keeps the one it was
// measured with (float(v), or warp_dot.cuh's small_u2f).
struct Q4kFactors {
    float a0, b0, a1, b1;
};
template <class Cvt>
__device__ __forceinline__ Q4kFactors q4k_factors(uint4 head, int p, Cvt cvt) {
    uint32_t scp, mp;
    q4k_scale_pair(head, p, scp, mp);
    const float d = __half2float(__ushort_as_half(uint16_t(head.x & 0xFFFF))),
                dmin = __half2float(__ushort_as_half(uint16_t(head.x >> 16)));
    return {__fmul_rn(d, cvt(scp & 0xFF)), __fmul_rn(dmin, cvt(mp & 0xFF)), __fmul_rn(d, cvt(scp >> 8)),
            __fmul_rn(dmin, cvt(mp >> 8))};
}
// A Q4_K block's first 16 bytes as four 4-byte loads (rows 4-byte aligned).
__device__ __forceinline__ uint4 q4k_head(const uint8_t* blk) {
    return make_uint4(*reinterpret_cast<const uint32_t*>(blk), *reinterpret_cast<const uint32_t*>(blk + 4),
                      *reinterpret_cast<const uint32_t*>(blk + 8), *reinterpret_cast<const uint32_t*>(blk + 12));
}

// Element i of a row of type T.
template <GgmlType T>
__device__ __forceinline__ float decode(const uint8_t* row, int64_t i);

template <>
__device__ __forceinline__ float decode<GgmlType::F32>(const uint8_t* row, int64_t i) {
    return reinterpret_cast<const float*>(row)[i];
}
template <>
__device__ __forceinline__ float decode<GgmlType::F16>(const uint8_t* row, int64_t i) {
    return __half2float(reinterpret_cast<const __half*>(row)[i]);
}
template <>
__device__ __forceinline__ float decode<GgmlType::BF16>(const uint8_t* row, int64_t i) {
    return __uint_as_float(uint32_t(reinterpret_cast<const uint16_t*>(row)[i]) << 16);
}
template <>
__device__ __forceinline__ float decode<GgmlType::Q8_0>(const uint8_t* row, int64_t i) {
    const uint8_t* b = row + (i >> 5) * 34;
    return float(int8_t(b[2 + (i & 31)])) * half_at(b);
}
template <>
__device__ __forceinline__ float decode<GgmlType::Q4_0>(const uint8_t* row, int64_t i) {
    const uint8_t* b = row + (i >> 5) * 18;
    const int j = int(i & 31);
    const int q = j < 16 ? (b[2 + j] & 0xF) : (b[2 + j - 16] >> 4);
    return float(q - 8) * half_at(b);
}
template <>
__device__ __forceinline__ float decode<GgmlType::Q4_1>(const uint8_t* row, int64_t i) {
    const uint8_t* b = row + (i >> 5) * 20;
    const int j = int(i & 31);
    const int q = j < 16 ? (b[4 + j] & 0xF) : (b[4 + j - 16] >> 4);
    return __fadd_rn(__fmul_rn(float(q), half_at(b)), half_at(b + 2));
}
template <>
__device__ __forceinline__ float decode<GgmlType::Q5_0>(const uint8_t* row, int64_t i) {
    const uint8_t* b = row + (i >> 5) * 22;
    const int j = int(i & 31);
    const int lo = j < 16 ? (b[6 + j] & 0xF) : (b[6 + j - 16] >> 4);
    const int hi = int((u32(b + 2) >> j) & 1) << 4;
    return float((lo | hi) - 16) * half_at(b);
}
template <>
__device__ __forceinline__ float decode<GgmlType::Q5_1>(const uint8_t* row, int64_t i) {
    const uint8_t* b = row + (i >> 5) * 24;
    const int j = int(i & 31);
    const int lo = j < 16 ? (b[8 + j] & 0xF) : (b[8 + j - 16] >> 4);
    const int hi = int((u32(b + 4) >> j) & 1) << 4;
    return __fadd_rn(__fmul_rn(float(lo | hi), half_at(b)), half_at(b + 2));
}
template <>
__device__ __forceinline__ float decode<GgmlType::IQ4_NL>(const uint8_t* row, int64_t i) {
    const uint8_t* b = row + (i >> 5) * 18;
    const int j = int(i & 31);
    const int q = j < 16 ? (b[2 + j] & 0xF) : (b[2 + j - 16] >> 4);
    return half_at(b) * float(g_iq4nl_values[q]);
}
template <>
__device__ __forceinline__ float decode<GgmlType::Q2_K>(const uint8_t* row, int64_t i) {
    const uint8_t* b = row + (i >> 8) * 84;  // scales[16] qs[64] d dmin
    const int j = int(i & 255), half = j >> 7, r = j & 127, plane = r >> 5, part = (r >> 4) & 1, l = r & 15;
    const int sc = b[half * 8 + plane * 2 + part];
    const int q = (b[16 + half * 32 + part * 16 + l] >> (2 * plane)) & 3;
    const float dl = __fmul_rn(half_at(b + 80), float(sc & 0xF));
    const float ml = __fmul_rn(half_at(b + 82), float(sc >> 4));
    return __fsub_rn(__fmul_rn(dl, float(q)), ml);
}
template <>
__device__ __forceinline__ float decode<GgmlType::Q3_K>(const uint8_t* row, int64_t i) {
    const uint8_t* b = row + (i >> 8) * 110;  // hmask[32] qs[64] scales[12] d
    const int j = int(i & 255), half = j >> 7, r = j & 127, plane = r >> 5, part = (r >> 4) & 1;
    const int l = 16 * part + (r & 15);
    const int is = half * 8 + plane * 2 + part;
    const uint8_t* s = b + 96;
    const int lo = is < 8 ? (s[is] & 0xF) : (s[is - 8] >> 4);
    const int hi = (s[8 + is % 4] >> (2 * (is / 4))) & 3;
    const int sc = (lo | (hi << 4)) - 32;
    const int v = ((b[32 + 32 * half + l] >> (2 * plane)) & 3) - ((b[l] & (1 << (4 * half + plane))) ? 0 : 4);
    return __fmul_rn(__fmul_rn(half_at(b + 108), float(sc)), float(v));
}
template <>
__device__ __forceinline__ float decode<GgmlType::Q4_K>(const uint8_t* row, int64_t i) {
    const uint8_t* b = row + (i >> 8) * 144;  // d dmin scales[12] qs[128]
    const int j = int(i & 255), pair = j >> 6, hi = (j >> 5) & 1, l = j & 31;
    int sc, m;
    k_scale_min(2 * pair + hi, b + 4, sc, m);
    const uint8_t q = b[16 + 32 * pair + l];
    const int nib = hi ? (q >> 4) : (q & 0xF);
    return __fsub_rn(__fmul_rn(__fmul_rn(half_at(b), float(sc)), float(nib)),
                     __fmul_rn(half_at(b + 2), float(m)));
}
template <>
__device__ __forceinline__ float decode<GgmlType::Q5_K>(const uint8_t* row, int64_t i) {
    const uint8_t* b = row + (i >> 8) * 176;  // d dmin scales[12] qh[32] qs[128]
    const int j = int(i & 255), pair = j >> 6, hi = (j >> 5) & 1, l = j & 31, sub = 2 * pair + hi;
    int sc, m;
    k_scale_min(sub, b + 4, sc, m);
    const uint8_t q = b[48 + 32 * pair + l];
    const int v = (hi ? (q >> 4) : (q & 0xF)) + ((b[16 + l] & (1 << sub)) ? 16 : 0);
    return __fsub_rn(__fmul_rn(__fmul_rn(half_at(b), float(sc)), float(v)), __fmul_rn(half_at(b + 2), float(m)));
}
template <>
__device__ __forceinline__ float decode<GgmlType::Q6_K>(const uint8_t* row, int64_t i) {
    const uint8_t* b = row + (i >> 8) * 210;  // ql[128] qh[64] scales[16] d
    const int j = int(i & 255), half = j >> 7, r = j & 127, quad = r >> 5, l = r & 31;
    const uint8_t* ql = b + 64 * half;
    const uint8_t qh = b[128 + 32 * half + l];
    const int low = (quad & 1) ? ql[l + 32] : ql[l];
    const int q = ((quad & 2) ? (low >> 4) : (low & 0xF)) | (((qh >> (2 * quad)) & 3) << 4);
    const int sc = int8_t(b[192 + 8 * half + l / 16 + 2 * quad]);
    return __fmul_rn(__fmul_rn(half_at(b + 208), float(sc)), float(q - 32));
}
template <>
__device__ __forceinline__ float decode<GgmlType::IQ2_XXS>(const uint8_t* row, int64_t i) {
    const uint8_t* b = row + (i >> 8) * 66;  // d qs[64]
    const int j = int(i & 255), g = j >> 5, l = (j >> 3) & 3, e = j & 7;
    const uint8_t* q = b + 2 + 8 * g;
    const uint32_t codes = u32(q + 4);
    const float db = __fmul_rn(__fmul_rn(half_at(b), __fadd_rn(0.5f, float(codes >> 28))), 0.25f);
    const uint32_t c7 = (codes >> (7 * l)) & 127u;
    const uint32_t signs = c7 | ((__popc(c7) & 1u) << 7);
    const float v = __fmul_rn(db, float((g_iq2xxs_grid[q[l]] >> (8 * e)) & 0xFF));
    return (signs >> e) & 1 ? -v : v;
}
template <>
__device__ __forceinline__ float decode<GgmlType::IQ4_XS>(const uint8_t* row, int64_t i) {
    const uint8_t* b = row + (i >> 8) * 136;  // d scales_h scales_l[4] qs[128]
    const int j = int(i & 255), ib = j >> 5, r = j & 31;
    const int lo = (b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF;
    const int hi = (u16(b + 2) >> (2 * ib)) & 3;
    const float dl = __fmul_rn(half_at(b), float((lo | (hi << 4)) - 32));
    const uint8_t q = b[8 + 16 * ib + (r & 15)];
    return __fmul_rn(dl, float(g_iq4nl_values[r < 16 ? (q & 0xF) : (q >> 4)]));
}

template <GgmlType T> struct Layout;
#define DS4_LAYOUT(T, QK, BYTES) \
    template <> struct Layout<GgmlType::T> { static constexpr int qk = QK, bytes = BYTES; };
DS4_LAYOUT(F32, 1, 4) DS4_LAYOUT(F16, 1, 2) DS4_LAYOUT(BF16, 1, 2) DS4_LAYOUT(Q8_0, 32, 34)
DS4_LAYOUT(Q4_0, 32, 18) DS4_LAYOUT(Q4_1, 32, 20) DS4_LAYOUT(Q5_0, 32, 22) DS4_LAYOUT(Q5_1, 32, 24)
DS4_LAYOUT(IQ4_NL, 32, 18) DS4_LAYOUT(Q2_K, 256, 84) DS4_LAYOUT(Q3_K, 256, 110) DS4_LAYOUT(Q4_K, 256, 144)
DS4_LAYOUT(Q5_K, 256, 176) DS4_LAYOUT(Q6_K, 256, 210) DS4_LAYOUT(IQ2_XXS, 256, 66) DS4_LAYOUT(IQ4_XS, 256, 136)
#undef DS4_LAYOUT

constexpr int kChunk = 32;          // elements a lane decodes in one go
constexpr int kChunksInFlight = 2;  // chunks per lane whose loads are issued together

// One lane's share of the dot products of a row (k % 32 == 0 elements) with
// NT activation rows x[t] (t < n_tok, row stride ld_x): the lane owns whole
// 32-element chunks (a q8_0/q4_0 block, or 1/8 of a K-quant super-block),
// kChunksInFlight of them issued together. Sum the lanes with warp_sum.
// kLanes < 32: the row is shared by kLanes lanes (lane < kLanes), for rows
// of fewer chunks than a warp has lanes.
template <GgmlType T, int NT, int kLanes = 32>
__device__ __forceinline__ void lane_dot(const uint8_t* __restrict__ row, int64_t k, const float* __restrict__ x,
                                         int64_t ld_x, int n_tok, int lane, float (&acc)[NT]) {
    using L = Layout<T>;
    constexpr int kChunksPerBlock = L::qk >= kChunk ? L::qk / kChunk : 1;
    const int n_chunks = int(k / kChunk);
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
    for (int c0 = lane; c0 < n_chunks; c0 += kLanes * kChunksInFlight) {
#pragma unroll
        for (int u = 0; u < kChunksInFlight; ++u) {
            const int c = c0 + kLanes * u;
            if (c < n_chunks) {
                const uint8_t* blk;
                int off;  // first element of the chunk inside its block (a multiple of 32)
                if constexpr (L::qk >= kChunk) {
                    blk = row + size_t(c / kChunksPerBlock) * L::bytes;
                    off = (c % kChunksPerBlock) << 5;
                } else {
                    blk = row + size_t(c) * kChunk * L::bytes;
                    off = 0;
                }
                const float* xc = x + int64_t(c) * kChunk;
                float part[NT];
#pragma unroll
                for (int t = 0; t < NT; ++t) part[t] = 0.0f;
#pragma unroll
                for (int j = 0; j < kChunk; ++j) {
                    const float wv = decode<T>(blk, off + j);
#pragma unroll
                    for (int t = 0; t < NT; ++t)
                        if (t < n_tok) part[t] += wv * __ldg(xc + t * ld_x + j);
                }
#pragma unroll
                for (int t = 0; t < NT; ++t) acc[t] += part[t];
            }
        }
    }
}

// Coalesced warp-cooperative row dot for the hot types: in each step the
// 32 lanes read consecutive bytes of the same blocks (one 128-byte line of
// quants per warp load) and consecutive activations, each lane 8 elements.
// lane_dot's one-chunk-per-lane layout makes every warp load touch 32 lines
// and ran at ~100 GB/s; this is the layout llama.cpp's mmvq uses too.
// Needs the activations 16-byte aligned (float4 loads; checked by callers).
template <GgmlType T>
constexpr bool kHasWarpDot =
    T == GgmlType::Q4_K || T == GgmlType::Q6_K || T == GgmlType::Q8_0 || T == GgmlType::F32 ||
    T == GgmlType::F16 || T == GgmlType::BF16;

template <int NT>
__device__ __forceinline__ void load4(const float* __restrict__ x, int64_t ld_x, int n_tok, float4 (&v)[NT]) {
#pragma unroll
    for (int t = 0; t < NT; ++t)
        v[t] = t < n_tok ? __ldg(reinterpret_cast<const float4*>(x + t * ld_x)) : make_float4(0.f, 0.f, 0.f, 0.f);
}

// warp_row_dot's Q4_K and Q6_K steps for NR rows at once (rows[i], each
// k elements): each step's activation loads serve every row. A row's sum is
// the same expression whatever NR is, so results do not depend on it.
template <GgmlType T>
constexpr bool kHasRowsDot = T == GgmlType::Q4_K || T == GgmlType::Q6_K;

template <GgmlType T, int NT, int NR>
__device__ __forceinline__ void warp_rows_dot(const uint8_t* const (&rows)[NR], int64_t k, const float* __restrict__ x,
                                              int64_t ld_x, int n_tok, int lane, float (&acc)[NR][NT], int part,
                                              int n_parts) {
#pragma unroll
    for (int r = 0; r < NR; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;
    if constexpr (T == GgmlType::Q4_K) {
        const int p = lane >> 3, i = lane & 7;  // sub-block pair p, bytes 4i..4i+3 of its 32
        const int64_t nb = k / 256;
#pragma unroll 2
        for (int64_t b = part; b < nb; b += n_parts) {
            const float* xb = x + b * 256 + 64 * p + 4 * i;
            float4 x0[NT], x1[NT];
            load4<NT>(xb, ld_x, n_tok, x0);
            load4<NT>(xb + 32, ld_x, n_tok, x1);
#pragma unroll
            for (int r = 0; r < NR; ++r) {
                const uint8_t* blk = rows[r] + b * 144;
                const uint32_t q = *reinterpret_cast<const uint32_t*>(blk + 16 + 32 * p + 4 * i);
                // The pair's scales without branches (lanes p < 2 and p >= 2 take different rules).
                const auto [a0, b0, a1, b1] = q4k_factors(q4k_head(blk), p, [](uint32_t v) { return float(v); });
                const float q00 = float(q & 0xF), q01 = float((q >> 8) & 0xF), q02 = float((q >> 16) & 0xF),
                            q03 = float((q >> 24) & 0xF);
                const float q10 = float((q >> 4) & 0xF), q11 = float((q >> 12) & 0xF), q12 = float((q >> 20) & 0xF),
                            q13 = float((q >> 28) & 0xF);
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    const float s0 = q00 * x0[t].x + q01 * x0[t].y + q02 * x0[t].z + q03 * x0[t].w;
                    const float s1 = q10 * x1[t].x + q11 * x1[t].y + q12 * x1[t].z + q13 * x1[t].w;
                    const float sx0 = x0[t].x + x0[t].y + x0[t].z + x0[t].w;
                    const float sx1 = x1[t].x + x1[t].y + x1[t].z + x1[t].w;
                    acc[r][t] += (a0 * s0 - b0 * sx0) + (a1 * s1 - b1 * sx1);
                }
            }
        }
    } else if constexpr (T == GgmlType::Q6_K) {
        const int h = lane >> 4, m = lane & 15;  // half h, element pair 2m, 2m+1 of each quarter
        const int64_t nb = k / 256;
#pragma unroll 2
        for (int64_t b = part; b < nb; b += n_parts) {
            const float* xb = x + b * 256 + 128 * h + 2 * m;
            float2 xv[NT][4];
#pragma unroll
            for (int t = 0; t < NT; ++t)
#pragma unroll
                for (int qd = 0; qd < 4; ++qd)
                    xv[t][qd] = t < n_tok ? __ldg(reinterpret_cast<const float2*>(xb + t * ld_x + 32 * qd))
                                          : make_float2(0.0f, 0.0f);
#pragma unroll
            for (int r = 0; r < NR; ++r) {
                const uint8_t* blk = rows[r] + b * 210;
                const uint32_t la = *reinterpret_cast<const uint16_t*>(blk + 64 * h + 2 * m);
                const uint32_t lb = *reinterpret_cast<const uint16_t*>(blk + 64 * h + 32 + 2 * m);
                const uint32_t hv = *reinterpret_cast<const uint16_t*>(blk + 128 + 32 * h + 2 * m);
                const float d = half_at(blk + 208);
                const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192 + 8 * h + (m >> 3));
                float qv[4][2];
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const uint32_t a = (la >> (8 * e)) & 0xFF, bb = (lb >> (8 * e)) & 0xFF, hb = (hv >> (8 * e)) & 0xFF;
                    qv[0][e] = float(int((a & 0xF) | ((hb & 3) << 4)) - 32);
                    qv[1][e] = float(int((bb & 0xF) | (((hb >> 2) & 3) << 4)) - 32);
                    qv[2][e] = float(int((a >> 4) | (((hb >> 4) & 3) << 4)) - 32);
                    qv[3][e] = float(int((bb >> 4) | (((hb >> 6) & 3) << 4)) - 32);
                }
#pragma unroll
                for (int qd = 0; qd < 4; ++qd) {
                    const float s = __fmul_rn(d, float(sc[2 * qd]));
#pragma unroll
                    for (int t = 0; t < NT; ++t)
                        if (t < n_tok) acc[r][t] += s * (qv[qd][0] * xv[t][qd].x + qv[qd][1] * xv[t][qd].y);
                }
            }
        }
    }
}

template <GgmlType T, int NT>
__device__ __forceinline__ void warp_row_dot(const uint8_t* __restrict__ row, int64_t k, const float* __restrict__ x,
                                             int64_t ld_x, int n_tok, int lane, float (&acc)[NT], int part = 0,
                                             int n_parts = 1) {
    // With n_parts warps on one row, this warp takes steps part, part + n_parts, ...
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
    if constexpr (kHasRowsDot<T>) {
        const uint8_t* const rows[1] = {row};
        float a[1][NT];
        warp_rows_dot<T, NT, 1>(rows, k, x, ld_x, n_tok, lane, a, part, n_parts);
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[t] = a[0][t];
    } else if constexpr (T == GgmlType::F32) {
        // 256 floats per warp step, 8 per lane (two float4 of weights and of x).
        const float* wr = reinterpret_cast<const float*>(row);
#pragma unroll 2
        for (int64_t e0 = 256 * int64_t(part) + 8 * lane; e0 < k; e0 += 256 * int64_t(n_parts)) {
            const float4 w0 = __ldg(reinterpret_cast<const float4*>(wr + e0));
            const float4 w1 = __ldg(reinterpret_cast<const float4*>(wr + e0 + 4));
            float4 x0[NT], x1[NT];
            load4<NT>(x + e0, ld_x, n_tok, x0);
            load4<NT>(x + e0 + 4, ld_x, n_tok, x1);
#pragma unroll
            for (int t = 0; t < NT; ++t)
                acc[t] += w0.x * x0[t].x + w0.y * x0[t].y + w0.z * x0[t].z + w0.w * x0[t].w + w1.x * x1[t].x +
                          w1.y * x1[t].y + w1.z * x1[t].z + w1.w * x1[t].w;
        }
    } else if constexpr (T == GgmlType::F16 || T == GgmlType::BF16) {
        // 256 halves per warp step, 8 per lane: one 16-byte load of weights and two
        // float4 of x (lane_dot read them one 2-byte load at a time: ~95 GB/s).
        const uint16_t* wr = reinterpret_cast<const uint16_t*>(row);
#pragma unroll 2
        for (int64_t e0 = 256 * int64_t(part) + 8 * lane; e0 < k; e0 += 256 * int64_t(n_parts)) {
            const uint4 v = __ldg(reinterpret_cast<const uint4*>(wr + e0));
            float wf[8];
            const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                if constexpr (T == GgmlType::F16) {
                    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&words[q]));
                    wf[2 * q] = f.x;
                    wf[2 * q + 1] = f.y;
                } else {
                    wf[2 * q] = __uint_as_float(words[q] << 16);
                    wf[2 * q + 1] = __uint_as_float(words[q] & 0xFFFF0000u);
                }
            }
            float4 x0[NT], x1[NT];
            load4<NT>(x + e0, ld_x, n_tok, x0);
            load4<NT>(x + e0 + 4, ld_x, n_tok, x1);
#pragma unroll
            for (int t = 0; t < NT; ++t)
                acc[t] += wf[0] * x0[t].x + wf[1] * x0[t].y + wf[2] * x0[t].z + wf[3] * x0[t].w + wf[4] * x1[t].x +
                          wf[5] * x1[t].y + wf[6] * x1[t].z + wf[7] * x1[t].w;
        }
    } else if constexpr (T == GgmlType::Q8_0) {
        const int bi = lane >> 2, quarter = lane & 3;  // block bi of 8 per step, elements 8 quarter .. + 7
        const int64_t nb = k / 32;
#pragma unroll 2
        for (int64_t b0 = 8 * int64_t(part); b0 < nb; b0 += 8 * int64_t(n_parts)) {
            const int64_t b = b0 + bi;
            if (b < nb) {
                const uint8_t* blk = row + b * 34;
                const uint16_t* q = reinterpret_cast<const uint16_t*>(blk + 2 + 8 * quarter);
                const uint32_t w0 = q[0], w1 = q[1], w2 = q[2], w3 = q[3];
                const float d = half_at(blk);
                const float* xb = x + b * 32 + 8 * quarter;
                float4 x0[NT], x1[NT];
                load4<NT>(xb, ld_x, n_tok, x0);
                load4<NT>(xb + 4, ld_x, n_tok, x1);
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    const float s = float(int8_t(w0 & 0xFF)) * x0[t].x + float(int8_t(w0 >> 8)) * x0[t].y +
                                    float(int8_t(w1 & 0xFF)) * x0[t].z + float(int8_t(w1 >> 8)) * x0[t].w +
                                    float(int8_t(w2 & 0xFF)) * x1[t].x + float(int8_t(w2 >> 8)) * x1[t].y +
                                    float(int8_t(w3 & 0xFF)) * x1[t].z + float(int8_t(w3 >> 8)) * x1[t].w;
                    acc[t] += d * s;
                }
            }
        }
    }
}

// Whether warp_row_dot may run: its type, k in whole blocks, quant loads
// aligned (rows at w + r * row_bytes) and float4 activations.
inline bool warp_dot_usable(GgmlType type, int64_t k, const void* w, size_t row_bytes, const float* x, int64_t ld_x) {
    const auto a = reinterpret_cast<uintptr_t>(w);
    const bool x_ok = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ld_x % 4 == 0;
    switch (type) {
        case GgmlType::Q4_K: return x_ok && k % 256 == 0 && a % 4 == 0 && row_bytes % 4 == 0;
        case GgmlType::Q6_K: return x_ok && k % 256 == 0 && a % 2 == 0 && row_bytes % 2 == 0;
        case GgmlType::Q8_0: return x_ok && k % 32 == 0 && a % 2 == 0 && row_bytes % 2 == 0;
        case GgmlType::F32: return x_ok && k % 8 == 0 && a % 16 == 0 && row_bytes % 16 == 0;
        case GgmlType::F16:
        case GgmlType::BF16: return x_ok && k % 8 == 0 && a % 16 == 0 && row_bytes % 16 == 0;
        default: return false;
    }
}

__device__ __forceinline__ float warp_sum(float s) {
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    return s;
}

// One weight row per block of kRowWarps warps, each warp a share of the
// row's blocks (warp_row_dot parts), summed through shared memory: short
// rows and small matrices (k/v projections, expert rows) get 4x the loads in
// flight of one warp per row. Thread 0 gets the sums in acc.
constexpr int kRowWarps = 4;
template <GgmlType T, int NT>
__device__ __forceinline__ void block_row_dot(const uint8_t* __restrict__ row, int64_t k, const float* __restrict__ x,
                                              int64_t ld_x, int n_tok, float (&acc)[NT]) {
    __shared__ float partial[kRowWarps][NT];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    warp_row_dot<T, NT>(row, k, x, ld_x, n_tok, lane, acc, warp, kRowWarps);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        const float s = warp_sum(acc[t]);
        if (lane == 0) partial[warp][t] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            float s = 0.0f;
#pragma unroll
            for (int w = 0; w < kRowWarps; ++w) s += partial[w][t];
            acc[t] = s;
        }
    }
}

// block_row_dot for NR rows (rows[i]) sharing each step's activation loads
// (types with kHasRowsDot): each row's sum is block_row_dot's, bit for bit.
// Thread 0 gets the sums in acc.
template <GgmlType T, int NT, int NR>
__device__ __forceinline__ void block_rows_dot(const uint8_t* const (&rows)[NR], int64_t k, const float* __restrict__ x,
                                               int64_t ld_x, int n_tok, float (&acc)[NR][NT]) {
    __shared__ float partial[kRowWarps][NR][NT];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    warp_rows_dot<T, NT, NR>(rows, k, x, ld_x, n_tok, lane, acc, warp, kRowWarps);
#pragma unroll
    for (int r = 0; r < NR; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const float s = warp_sum(acc[r][t]);
            if (lane == 0) partial[warp][r][t] = s;
        }
    __syncthreads();
    if (threadIdx.x == 0) {
#pragma unroll
        for (int r = 0; r < NR; ++r)
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                float s = 0.0f;
#pragma unroll
                for (int w = 0; w < kRowWarps; ++w) s += partial[w][r][t];
                acc[r][t] = s;
            }
    }
}

template <class F>
void dispatch_type(GgmlType type, F&& f) {
    switch (type) {
#define DS4_CASE(T) \
    case GgmlType::T: f(std::integral_constant<GgmlType, GgmlType::T>{}); return;
        DS4_CASE(F32) DS4_CASE(F16) DS4_CASE(BF16) DS4_CASE(Q8_0) DS4_CASE(Q4_0) DS4_CASE(Q4_1) DS4_CASE(Q5_0)
        DS4_CASE(Q5_1) DS4_CASE(IQ4_NL) DS4_CASE(Q2_K) DS4_CASE(Q3_K) DS4_CASE(Q4_K) DS4_CASE(Q5_K) DS4_CASE(Q6_K)
        DS4_CASE(IQ2_XXS) DS4_CASE(IQ4_XS)
#undef DS4_CASE
        default:
            throw Error("tensor type " + std::string(ggml_type_name(type)) + " has no CUDA kernel yet.");
    }
}


void upload_decode_tables() {
    check(cudaMemcpyToSymbol(g_iq2xxs_grid, kIq2xxsGrid, sizeof kIq2xxsGrid), "copying the IQ2_XXS codebook");
}

}  // namespace
}  // namespace ds4::cuda

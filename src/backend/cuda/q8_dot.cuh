// The int8-activation path of the decode products (the default; --exact
// keeps float activations): activations are rounded to 8 bits per block of
// 32 (scale amax / 127, round to nearest even), as llama.cpp's CUDA
// backend does for its mmvq kernels, and each weight row is multiplied with
// __dp4a, four weights per instruction, with the block scales applied once
// per 4-8 weights. The float path spends ~12 instructions per weight
// (extract, convert, FMA, scales) and is issue-bound far under HBM speed
// (bench/NOTES.md, 2026-12-01); this path spends ~2.
//
// Semantics, which the device tests hold the kernels to: y = W . x' where
// x' is x with every 32-element block b rounded to d_b * q, d_b = amax_b /
// 127, q = rint(x * (127 / amax_b)) (0 for an all-zero block). The product
// itself is exact integer arithmetic per 4-8 weights and float for the
// scales, so y differs from the float product on x' only by float rounding.
//
// Quantized activation rows: k int8 values, then k / 32 float scales
// (q8_row_bytes(k) bytes; k % 256 == 0, so every row is 16-byte aligned).
#pragma once

#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/quant_decode.cuh"

namespace ds4::cuda {
namespace {

__host__ __device__ constexpr int64_t q8_row_bytes(int64_t k) { return k + 4 * (k / 32); }

template <GgmlType T>
constexpr bool kHasQ8Dot = T == GgmlType::Q4_K || T == GgmlType::Q6_K || T == GgmlType::Q8_0;

// Eight consecutive activations x[8 c .. 8 c + 7] of a row, quantized by the
// four lanes that hold one 32-element block (lanes 4 b .. 4 b + 3 of a warp
// hold chunks 4 b .. 4 b + 3 of some block): the block's amax is reduced over
// those four lanes. Writes 8 int8 values at q + 8 c and, from the block's
// first lane, its scale at d[c / 4]. Every lane of the warp must call it
// (the shuffles), with `valid` false for lanes past the row.
__device__ __forceinline__ void quantize_chunk8(const float* __restrict__ x, int64_t c, bool valid, int8_t* q,
                                                float* d) {
    float4 a = make_float4(0.f, 0.f, 0.f, 0.f), b = a;
    if (valid) {
        a = *reinterpret_cast<const float4*>(x + 8 * c);
        b = *reinterpret_cast<const float4*>(x + 8 * c + 4);
    }
    float amax = fmaxf(fmaxf(fmaxf(fabsf(a.x), fabsf(a.y)), fmaxf(fabsf(a.z), fabsf(a.w))),
                       fmaxf(fmaxf(fabsf(b.x), fabsf(b.y)), fmaxf(fabsf(b.z), fabsf(b.w))));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    if (!valid) return;
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    auto q8 = [&](float v) { return uint32_t(__float2int_rn(v * id)) & 0xFFu; };
    const uint32_t lo = q8(a.x) | (q8(a.y) << 8) | (q8(a.z) << 16) | (q8(a.w) << 24);
    const uint32_t hi = q8(b.x) | (q8(b.y) << 8) | (q8(b.z) << 16) | (q8(b.w) << 24);
    *reinterpret_cast<uint2*>(q + 8 * c) = make_uint2(lo, hi);
    if ((c & 3) == 0) d[c / 4] = amax / 127.0f;
}

// A whole row of k values (k % 32 == 0, x 16-byte aligned) into q/d by the
// threads of a block (n_threads a multiple of 32).
__device__ __forceinline__ void quantize_row_block(const float* __restrict__ x, int64_t k, int8_t* q, float* d,
                                                   int tid, int n_threads) {
    const int64_t chunks = k / 8;
    for (int64_t c0 = 0; c0 < chunks; c0 += n_threads) quantize_chunk8(x, c0 + tid, c0 + tid < chunks, q, d);
}

// Signed 4-byte dot plus accumulator.
__device__ __forceinline__ int dp4a(int a, int b, int c) { return __dp4a(a, b, c); }
__device__ __forceinline__ int ld_i32(const int8_t* p) { return *reinterpret_cast<const int*>(p); }
// 4 bytes at a 2-byte-aligned address (Q6_K and Q8_0 blocks are 210 and 34 bytes).
__device__ __forceinline__ uint32_t ld_u32_a2(const uint8_t* p) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
    return uint32_t(h[0]) | (uint32_t(h[1]) << 16);
}

// acc[i][t] += lane's share of rows[i] . x'[t] over the whole row (k =
// 256 * n_sb), for a warp; the caller sums the lanes. xq[t] / xd[t]: the
// quantized activations of token t (global or shared memory).
template <GgmlType T, int NR, int NT>
__device__ __forceinline__ void q8_row_dot(const uint8_t* const (&rows)[NR], int64_t n_sb,
                                           const int8_t* const (&xq)[NT], const float* const (&xd)[NT], int n_tok,
                                           int lane, float (&acc)[NR][NT]) {
    if constexpr (T == GgmlType::Q4_K) {
        // Two super-blocks per warp step, 16 lanes each: lane (half, p, j)
        // reads bytes 8 j .. 8 j + 7 of the 32 holding sub-blocks 2 p (low
        // nibbles) and 2 p + 1 (high nibbles): elements 64 p + 8 j + 0..7 and
        // 64 p + 32 + 8 j + 0..7 of super-block s, one scale pair for all 16.
        const int half = lane >> 4, p = (lane >> 2) & 3, j = lane & 3;
#pragma unroll 4
        for (int64_t s = half; s < n_sb; s += 2) {
            const int64_t e = 256 * s + 64 * p + 8 * j;
            int2 alo[NT], ahi[NT];
            int slo[NT], shi[NT];
            float dlo[NT], dhi[NT];
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                if (NT > 1 && t >= n_tok) break;
                alo[t] = *reinterpret_cast<const int2*>(xq[t] + e);
                ahi[t] = *reinterpret_cast<const int2*>(xq[t] + e + 32);
                slo[t] = dp4a(0x01010101, alo[t].x, dp4a(0x01010101, alo[t].y, 0));
                shi[t] = dp4a(0x01010101, ahi[t].x, dp4a(0x01010101, ahi[t].y, 0));
                dlo[t] = xd[t][8 * s + 2 * p];
                dhi[t] = xd[t][8 * s + 2 * p + 1];
            }
#pragma unroll
            for (int i = 0; i < NR; ++i) {
                const uint8_t* blk = rows[i] + s * 144;
                const uint2 q = *reinterpret_cast<const uint2*>(blk + 16 + 32 * p + 8 * j);
                const uint4 head = *reinterpret_cast<const uint4*>(blk);  // d, dmin, scales[12]
                uint32_t scp, mp;  // the 6-bit scales and mins of sub-blocks 2 p, 2 p + 1, a byte each
                q4k_scale_pair(head, p, scp, mp);
                const float d = __half2float(__ushort_as_half(uint16_t(head.x & 0xFFFF))),
                            dmin = __half2float(__ushort_as_half(uint16_t(head.x >> 16)));
                const float a0 = d * float(scp & 0xFF), b0 = dmin * float(mp & 0xFF);
                const float a1 = d * float(scp >> 8), b1 = dmin * float(mp >> 8);
                const int lo0 = int(q.x & 0x0F0F0F0Fu), lo1 = int(q.y & 0x0F0F0F0Fu);
                const int hi0 = int((q.x >> 4) & 0x0F0F0F0Fu), hi1 = int((q.y >> 4) & 0x0F0F0F0Fu);
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    if (NT > 1 && t >= n_tok) break;
                    const int dl = dp4a(lo0, alo[t].x, dp4a(lo1, alo[t].y, 0));
                    const int dh = dp4a(hi0, ahi[t].x, dp4a(hi1, ahi[t].y, 0));
                    acc[i][t] += dlo[t] * (a0 * float(dl) - b0 * float(slo[t])) +
                                 dhi[t] * (a1 * float(dh) - b1 * float(shi[t]));
                }
            }
        }
    } else if constexpr (T == GgmlType::Q6_K) {
        // Two super-blocks per warp step, 16 lanes each: lane (half, h, m)
        // takes l = 4 m .. 4 m + 3 of half h, i.e. elements 128 h + 32 qd + l
        // for the four quarters qd (ql bytes l and l + 32, qh byte l), all
        // under the scales 8 h + l / 16 + 2 qd.
        const int half = lane >> 4, h = (lane >> 3) & 1, m = lane & 7;
#pragma unroll 4
        for (int64_t s = half; s < n_sb; s += 2) {
            const int64_t e = 256 * s + 128 * h + 4 * m;
            int a[NT][4], sa[NT][4];
            float da[NT][4];
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                if (NT > 1 && t >= n_tok) break;
#pragma unroll
                for (int qd = 0; qd < 4; ++qd) {
                    a[t][qd] = ld_i32(xq[t] + e + 32 * qd);
                    sa[t][qd] = dp4a(0x01010101, a[t][qd], 0);
                    da[t][qd] = xd[t][8 * s + 4 * h + qd];
                }
            }
#pragma unroll
            for (int i = 0; i < NR; ++i) {
                const uint8_t* blk = rows[i] + s * 210;
                const uint32_t la = ld_u32_a2(blk + 64 * h + 4 * m), lb = ld_u32_a2(blk + 64 * h + 32 + 4 * m);
                const uint32_t hv = ld_u32_a2(blk + 128 + 32 * h + 4 * m);
                const float d = half_at(blk + 208);
                const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192 + 8 * h + (m >> 2));
                const int v[4] = {int((la & 0x0F0F0F0Fu) | ((hv << 4) & 0x30303030u)),
                                  int((lb & 0x0F0F0F0Fu) | ((hv << 2) & 0x30303030u)),
                                  int(((la >> 4) & 0x0F0F0F0Fu) | (hv & 0x30303030u)),
                                  int(((lb >> 4) & 0x0F0F0F0Fu) | ((hv >> 2) & 0x30303030u))};
                float ds[4];
#pragma unroll
                for (int qd = 0; qd < 4; ++qd) ds[qd] = d * float(sc[2 * qd]);
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    if (NT > 1 && t >= n_tok) break;
                    float sum = 0.0f;
#pragma unroll
                    for (int qd = 0; qd < 4; ++qd)
                        sum += ds[qd] * da[t][qd] * float(dp4a(v[qd], a[t][qd], 0) - 32 * sa[t][qd]);
                    acc[i][t] += sum;
                }
            }
        }
    } else if constexpr (T == GgmlType::Q8_0) {
        // Eight 32-element blocks per warp step: lane (bi, quarter) takes
        // elements 8 quarter .. + 7 of block 8 s + bi.
        const int bi = lane >> 2, quarter = lane & 3;
#pragma unroll 4
        for (int64_t s = 0; s < n_sb; ++s) {
            const int64_t b = 8 * s + bi;
            int2 a[NT];
            float da[NT];
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                if (NT > 1 && t >= n_tok) break;
                a[t] = *reinterpret_cast<const int2*>(xq[t] + 32 * b + 8 * quarter);
                da[t] = xd[t][b];
            }
#pragma unroll
            for (int i = 0; i < NR; ++i) {
                const uint8_t* blk = rows[i] + b * 34;
                const int w0 = int(ld_u32_a2(blk + 2 + 8 * quarter)), w1 = int(ld_u32_a2(blk + 6 + 8 * quarter));
                const float d = half_at(blk);
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    if (NT > 1 && t >= n_tok) break;
                    acc[i][t] += d * da[t] * float(dp4a(w0, a[t].x, dp4a(w1, a[t].y, 0)));
                }
            }
        }
    }
}

// Whether q8_row_dot may read rows of this type at base + m * matrix_bytes +
// r * row_bytes: whole super-blocks and the alignment of its widest loads.
inline bool q8_dot_usable(GgmlType type, int64_t k, const void* base, size_t matrix_bytes, size_t row_bytes) {
    if (k % 256 != 0) return false;
    size_t align = 0;
    switch (type) {
        case GgmlType::Q4_K: align = 16; break;
        case GgmlType::Q6_K: case GgmlType::Q8_0: align = 2; break;
        default: return false;
    }
    return reinterpret_cast<uintptr_t>(base) % align == 0 && matrix_bytes % align == 0 && row_bytes % align == 0;
}

// f(std::integral_constant<GgmlType, T>) for the three types with a q8 dot.
template <class F>
void dispatch_q8(GgmlType type, F&& f) {
    switch (type) {
        case GgmlType::Q4_K: f(std::integral_constant<GgmlType, GgmlType::Q4_K>{}); return;
        case GgmlType::Q6_K: f(std::integral_constant<GgmlType, GgmlType::Q6_K>{}); return;
        case GgmlType::Q8_0: f(std::integral_constant<GgmlType, GgmlType::Q8_0>{}); return;
        default: throw Error("no int8-activation kernel for " + std::string(ggml_type_name(type)) + ".");
    }
}

}  // namespace
}  // namespace ds4::cuda

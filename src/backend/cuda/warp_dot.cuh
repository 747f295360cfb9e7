// One warp's coalesced dot products of NR weight rows with one activation
// row, 256 elements per step, for the types the fused MoE decode kernels
// read (moe_decode.cu). The NR rows share every activation load: on 2-bit
// experts a warp step reads 66-84 bytes of weights but 1 KiB of activations
// (float, from L1), so with one row per warp the L1 traffic, not HBM, bounds
// the kernel; two rows per step (gate and up of the same row, or two down
// rows) halve it.
//
// Lane layout in every type: the 32 lanes read consecutive bytes of the same
// block (or consecutive 16-byte vectors for F16/F32) and consecutive
// activations, each lane 8 elements, as warp_row_dot in quant_decode.cuh.
// Float semantics: each lane's 8 products are summed and scaled by the block
// scale(s) (as warp_row_dot does); only the summation order differs from the
// CPU's, which keeps rows within the suite's 1e-5 relative bound.
#pragma once

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/quant_decode.cuh"

namespace ds4::cuda {
namespace {

template <GgmlType T>
constexpr bool kHasDotStep = T == GgmlType::IQ2_XXS || T == GgmlType::Q2_K || T == GgmlType::Q3_K || T == GgmlType::Q4_K ||
                             T == GgmlType::Q6_K || T == GgmlType::Q8_0 || T == GgmlType::F16 ||
                             T == GgmlType::F32;

// float(v) for v < 2^23, exactly, without I2F: the bits 0x4B000000 | v are the
// float 2^23 + v, and subtracting 2^23 is exact. I2F issues at a quarter of the
// FP32 rate on Hopper, so this was expected to pay; measured on the H200 it
// did not (the kernels are issue-bound and this is two full-rate instructions
// for one I2F: bench/NOTES.md, 2026-12-01). Kept: bit-identical, no slower.
__device__ __forceinline__ float small_u2f(uint32_t v) { return __uint_as_float(0x4B000000u | v) - 8388608.0f; }
// float(v - bias) for v < 2^23 and bias < 2^23, exactly (2^23 + v - (2^23 + bias)).
template <int kBias>
__device__ __forceinline__ float small_u2f_minus(uint32_t v) {
    return __uint_as_float(0x4B000000u | v) - float(8388608 + kBias);
}
// float(int8_t(b)) for the byte b (low 8 bits of v).
__device__ __forceinline__ float s8_to_f(uint32_t v) { return small_u2f_minus<128>((v & 0xFFu) ^ 0x80u); }

__device__ __forceinline__ float4 ldx4(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }
__device__ __forceinline__ float2 ldx2(const float* p) { return __ldg(reinterpret_cast<const float2*>(p)); }

// acc[i][a] += lane's share of rows[i][256 s .. 256 s + 255] . xs[a][256 s ..]
// for NR weight rows and NA activation rows: each weight row is decoded once
// and used for every activation (the grouped MoE decode gives a warp every
// pair routed to one expert). xs[a] is the start of activation row a
// (16-byte aligned, global memory); the rows may be in global or shared
// memory (plain loads, no __ldg, for that reason). Every (row, activation)
// product is the same expression whatever NR and NA are, so a pair's result
// does not depend on which others share its step.
template <GgmlType T, int NR, int NA>
__device__ __forceinline__ void dot_step_n(const uint8_t* const (&rows)[NR], int64_t s,
                                           const float* const (&xs)[NA], int lane, float (&acc)[NR][NA]) {
    if constexpr (T == GgmlType::IQ2_XXS) {
        // Super-block: d (f16), then 8 groups of 8 bytes (4 codebook indices, a
        // u32 of 4x7 sign bits and a 4-bit scale). Lane 4g + l: group g, index l
        // (8 elements 32 g + 8 l .. + 7).
        const int g = lane >> 2, l = lane & 3;
        float4 x0[NA], x1[NA];
#pragma unroll
        for (int a = 0; a < NA; ++a) {
            const float* xb = xs[a] + s * 256 + 32 * g + 8 * l;
            x0[a] = ldx4(xb);
            x1[a] = ldx4(xb + 4);
        }
#pragma unroll
        for (int i = 0; i < NR; ++i) {
            const uint8_t* blk = rows[i] + s * 66;
            const uint8_t* q = blk + 2 + 8 * g;
            const uint32_t codes = uint32_t(*reinterpret_cast<const uint16_t*>(q + 4)) |
                                   (uint32_t(*reinterpret_cast<const uint16_t*>(q + 6)) << 16);
            const uint64_t grid = g_iq2xxs_grid[q[l]];
            const float d = __half2float(*reinterpret_cast<const __half*>(blk));
            const float db = __fmul_rn(__fmul_rn(d, __fadd_rn(0.5f, small_u2f(codes >> 28))), 0.25f);
            const uint32_t c7 = (codes >> (7 * l)) & 127u;
            const uint32_t signs = c7 | ((__popc(c7) & 1u) << 7);
            // The sign flips the activation's sign bit: one LOP per element.
            auto term = [&](int e, float xv) {
                const float m = small_u2f(uint32_t(grid >> (8 * e)) & 0xFFu);
                return m * __uint_as_float(__float_as_uint(xv) ^ (((signs >> e) & 1u) << 31));
            };
#pragma unroll
            for (int a = 0; a < NA; ++a) {
                const float sum = term(0, x0[a].x) + term(1, x0[a].y) + term(2, x0[a].z) + term(3, x0[a].w) +
                                  term(4, x1[a].x) + term(5, x1[a].y) + term(6, x1[a].z) + term(7, x1[a].w);
                acc[i][a] += db * sum;
            }
        }
    } else if constexpr (T == GgmlType::Q2_K || T == GgmlType::Q3_K) {
        // Lane 16 h + 4 p + 2 part + g takes the 8 elements 128 h + 32 p + 16 part
        // + 8 g .. + 7: one 16-element sub-block (sub-scale 8 h + 2 p + part), so
        // a lane decodes one scale a step and its 8 values come from 8
        // consecutive quant bytes (bits 2 p of each). The earlier layout (two
        // elements of each of 4 planes a lane) decoded 4 scales per 8 values and
        // left the kernels issue-bound (GLM-5 q2 decode, H200, 2026-12-04).
        // Q2_K: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin.
        // Q3_K (110 bytes, so 2-byte loads only): hmask[32] (bit 4 h + p of
        // byte l: the high bit of element 128 h + 32 p + l), qs[64], scales[12]
        // (16 6-bit scales biased by 32: low nibbles in bytes 0-7, high pairs
        // in bytes 8-11), d.
        const int h = lane >> 4, p = (lane >> 2) & 3, part = (lane >> 1) & 1, g = lane & 1;
        const int sub = 2 * p + part;  // sub-scale 8 h + sub
        const int l0 = 16 * part + 8 * g;  // the lane's first byte within its 32
        float4 x0[NA], x1[NA];
        float sx[NA];
#pragma unroll
        for (int a = 0; a < NA; ++a) {
            const float* xb = xs[a] + s * 256 + 128 * h + 32 * p + l0;
            x0[a] = ldx4(xb);
            x1[a] = ldx4(xb + 4);
            sx[a] = (x0[a].x + x0[a].y + x0[a].z + x0[a].w) + (x1[a].x + x1[a].y + x1[a].z + x1[a].w);
        }
#pragma unroll
        for (int i = 0; i < NR; ++i) {
            float q[8], dl, ml = 0.0f;
            if constexpr (T == GgmlType::Q2_K) {
                const uint8_t* blk = rows[i] + s * 84;
                const uint32_t w0 = *reinterpret_cast<const uint32_t*>(blk + 16 + 32 * h + l0),
                               w1 = *reinterpret_cast<const uint32_t*>(blk + 20 + 32 * h + l0);
                const uint32_t sc = blk[8 * h + sub];
                const uint32_t dd = *reinterpret_cast<const uint32_t*>(blk + 80);
                dl = __fmul_rn(__half2float(__ushort_as_half(uint16_t(dd & 0xFFFF))), small_u2f(sc & 0xF));
                ml = __fmul_rn(__half2float(__ushort_as_half(uint16_t(dd >> 16))), small_u2f(sc >> 4));
                const uint32_t v0 = (w0 >> (2 * p)) & 0x03030303u, v1 = (w1 >> (2 * p)) & 0x03030303u;
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    q[e] = small_u2f((v0 >> (8 * e)) & 0xFFu);
                    q[4 + e] = small_u2f((v1 >> (8 * e)) & 0xFFu);
                }
            } else {
                const uint8_t* blk = rows[i] + s * 110;
                auto u32at = [blk](int off) {  // two 2-byte loads
                    return uint32_t(*reinterpret_cast<const uint16_t*>(blk + off)) |
                           (uint32_t(*reinterpret_cast<const uint16_t*>(blk + off + 2)) << 16);
                };
                const uint32_t w0 = u32at(32 + 32 * h + l0), w1 = u32at(36 + 32 * h + l0);
                const uint32_t m0 = u32at(l0), m1 = u32at(l0 + 4);
                // Scale 8 h + sub: low nibble in byte sub (h = 0) or its high
                // nibble (h = 1); high pair in byte 8 + (sub & 3), bits 2 (2 h + (sub >> 2)).
                const uint32_t low = (uint32_t(blk[96 + sub]) >> (4 * h)) & 0xFu;
                const uint32_t high = (uint32_t(blk[104 + (sub & 3)]) >> (2 * (2 * h + (sub >> 2)))) & 3u;
                dl = __fmul_rn(__half2float(__ushort_as_half(*reinterpret_cast<const uint16_t*>(blk + 108))),
                               small_u2f_minus<32>(low | (high << 4)));
                // 3-bit values 0..7 (value + 4) in bytes: 2 low bits and the high bit.
                const int hs = 4 * h + p;
                const uint32_t v0 = ((w0 >> (2 * p)) & 0x03030303u) | (((m0 >> hs) & 0x01010101u) << 2),
                               v1 = ((w1 >> (2 * p)) & 0x03030303u) | (((m1 >> hs) & 0x01010101u) << 2);
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    q[e] = small_u2f_minus<4>((v0 >> (8 * e)) & 0xFFu);
                    q[4 + e] = small_u2f_minus<4>((v1 >> (8 * e)) & 0xFFu);
                }
            }
#pragma unroll
            for (int a = 0; a < NA; ++a) {
                const float dot = (q[0] * x0[a].x + q[1] * x0[a].y + q[2] * x0[a].z + q[3] * x0[a].w) +
                                  (q[4] * x1[a].x + q[5] * x1[a].y + q[6] * x1[a].z + q[7] * x1[a].w);
                if constexpr (T == GgmlType::Q2_K) acc[i][a] += dl * dot - ml * sx[a];
                else acc[i][a] += dl * dot;
            }
        }
    } else if constexpr (T == GgmlType::Q4_K) {
        const int p = lane >> 3, q4 = lane & 7;  // sub-block pair p, bytes 4 q4 .. 4 q4 + 3 of its 32
        float4 x0[NA], x1[NA];
        float sx0[NA], sx1[NA];
#pragma unroll
        for (int a = 0; a < NA; ++a) {
            const float* xb = xs[a] + s * 256 + 64 * p + 4 * q4;
            x0[a] = ldx4(xb);
            x1[a] = ldx4(xb + 32);
            sx0[a] = x0[a].x + x0[a].y + x0[a].z + x0[a].w;
            sx1[a] = x1[a].x + x1[a].y + x1[a].z + x1[a].w;
        }
#pragma unroll
        for (int i = 0; i < NR; ++i) {
            const uint8_t* blk = rows[i] + s * 144;
            const uint32_t q = *reinterpret_cast<const uint32_t*>(blk + 16 + 32 * p + 4 * q4);
            // Scales without branches: lanes p < 2 and p >= 2 take different rules.
            const auto [a0, b0, a1, b1] = q4k_factors(q4k_head(blk), p, small_u2f);
            const float v0 = small_u2f(q & 0xF), v1 = small_u2f((q >> 8) & 0xF), v2 = small_u2f((q >> 16) & 0xF),
                        v3 = small_u2f((q >> 24) & 0xF);
            const float u0 = small_u2f((q >> 4) & 0xF), u1 = small_u2f((q >> 12) & 0xF),
                        u2 = small_u2f((q >> 20) & 0xF), u3 = small_u2f(q >> 28);
#pragma unroll
            for (int a = 0; a < NA; ++a) {
                const float s0 = v0 * x0[a].x + v1 * x0[a].y + v2 * x0[a].z + v3 * x0[a].w;
                const float s1 = u0 * x1[a].x + u1 * x1[a].y + u2 * x1[a].z + u3 * x1[a].w;
                acc[i][a] += (a0 * s0 - b0 * sx0[a]) + (a1 * s1 - b1 * sx1[a]);
            }
        }
    } else if constexpr (T == GgmlType::Q6_K) {
        const int h = lane >> 4, m = lane & 15;  // half h, element pair 2m, 2m+1 of each quarter
        float2 xv[NA][4];
#pragma unroll
        for (int a = 0; a < NA; ++a) {
            const float* xb = xs[a] + s * 256 + 128 * h + 2 * m;
#pragma unroll
            for (int qd = 0; qd < 4; ++qd) xv[a][qd] = ldx2(xb + 32 * qd);
        }
#pragma unroll
        for (int i = 0; i < NR; ++i) {
            const uint8_t* blk = rows[i] + s * 210;
            const uint32_t la = *reinterpret_cast<const uint16_t*>(blk + 64 * h + 2 * m);
            const uint32_t lb = *reinterpret_cast<const uint16_t*>(blk + 64 * h + 32 + 2 * m);
            const uint32_t hv = *reinterpret_cast<const uint16_t*>(blk + 128 + 32 * h + 2 * m);
            const float d = half_at(blk + 208);
            const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192 + 8 * h + (m >> 3));
            float qv[4][2], ds[4];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const uint32_t a = (la >> (8 * e)) & 0xFF, bb = (lb >> (8 * e)) & 0xFF, hb = (hv >> (8 * e)) & 0xFF;
                qv[0][e] = small_u2f_minus<32>((a & 0xF) | ((hb & 3) << 4));
                qv[1][e] = small_u2f_minus<32>((bb & 0xF) | (((hb >> 2) & 3) << 4));
                qv[2][e] = small_u2f_minus<32>((a >> 4) | (((hb >> 4) & 3) << 4));
                qv[3][e] = small_u2f_minus<32>((bb >> 4) | (((hb >> 6) & 3) << 4));
            }
#pragma unroll
            for (int qd = 0; qd < 4; ++qd) ds[qd] = __fmul_rn(d, s8_to_f(uint8_t(sc[2 * qd])));
#pragma unroll
            for (int a = 0; a < NA; ++a)
#pragma unroll
                for (int qd = 0; qd < 4; ++qd)
                    acc[i][a] += ds[qd] * (qv[qd][0] * xv[a][qd].x + qv[qd][1] * xv[a][qd].y);
        }
    } else if constexpr (T == GgmlType::Q8_0) {
        const int bi = lane >> 2, quarter = lane & 3;  // block bi of the step's 8, elements 8 quarter .. + 7
        const int64_t b = 8 * s + bi;
        float4 x0[NA], x1[NA];
#pragma unroll
        for (int a = 0; a < NA; ++a) {
            const float* xb = xs[a] + b * 32 + 8 * quarter;
            x0[a] = ldx4(xb);
            x1[a] = ldx4(xb + 4);
        }
#pragma unroll
        for (int i = 0; i < NR; ++i) {
            const uint8_t* blk = rows[i] + b * 34;
            const uint16_t* q = reinterpret_cast<const uint16_t*>(blk + 2 + 8 * quarter);
            const uint32_t w0 = q[0], w1 = q[1], w2 = q[2], w3 = q[3];
            const float d = half_at(blk);
            const float c0 = s8_to_f(w0), c1 = s8_to_f(w0 >> 8), c2 = s8_to_f(w1), c3 = s8_to_f(w1 >> 8),
                        c4 = s8_to_f(w2), c5 = s8_to_f(w2 >> 8), c6 = s8_to_f(w3), c7 = s8_to_f(w3 >> 8);
#pragma unroll
            for (int a = 0; a < NA; ++a) {
                const float sum = c0 * x0[a].x + c1 * x0[a].y + c2 * x0[a].z + c3 * x0[a].w + c4 * x1[a].x +
                                  c5 * x1[a].y + c6 * x1[a].z + c7 * x1[a].w;
                acc[i][a] += d * sum;
            }
        }
    } else if constexpr (T == GgmlType::F16) {
        const int64_t e0 = 256 * s + 8 * lane;  // one 16-byte load of 8 halves per lane and row
        float4 x0[NA], x1[NA];
#pragma unroll
        for (int a = 0; a < NA; ++a) {
            x0[a] = ldx4(xs[a] + e0);
            x1[a] = ldx4(xs[a] + e0 + 4);
        }
#pragma unroll
        for (int i = 0; i < NR; ++i) {
            const uint4 v = *reinterpret_cast<const uint4*>(rows[i] + 2 * e0);  // global or staged in shared
            const float2 w01 = __half22float2(*reinterpret_cast<const __half2*>(&v.x)),
                         w23 = __half22float2(*reinterpret_cast<const __half2*>(&v.y)),
                         w45 = __half22float2(*reinterpret_cast<const __half2*>(&v.z)),
                         w67 = __half22float2(*reinterpret_cast<const __half2*>(&v.w));
#pragma unroll
            for (int a = 0; a < NA; ++a)
                acc[i][a] += w01.x * x0[a].x + w01.y * x0[a].y + w23.x * x0[a].z + w23.y * x0[a].w +
                             w45.x * x1[a].x + w45.y * x1[a].y + w67.x * x1[a].z + w67.y * x1[a].w;
        }
    } else if constexpr (T == GgmlType::F32) {
        const int64_t e0 = 256 * s + 8 * lane;
        float4 x0[NA], x1[NA];
#pragma unroll
        for (int a = 0; a < NA; ++a) {
            x0[a] = ldx4(xs[a] + e0);
            x1[a] = ldx4(xs[a] + e0 + 4);
        }
#pragma unroll
        for (int i = 0; i < NR; ++i) {
            const float* wr = reinterpret_cast<const float*>(rows[i]);
            const float4 w0 = *reinterpret_cast<const float4*>(wr + e0);  // global or staged in shared
            const float4 w1 = *reinterpret_cast<const float4*>(wr + e0 + 4);
#pragma unroll
            for (int a = 0; a < NA; ++a)
                acc[i][a] += w0.x * x0[a].x + w0.y * x0[a].y + w0.z * x0[a].z + w0.w * x0[a].w + w1.x * x1[a].x +
                             w1.y * x1[a].y + w1.z * x1[a].z + w1.w * x1[a].w;
        }
    }
}

// acc[i] += lane's share of rows[i][256 s ..] . x[256 s ..]: one activation row.
template <GgmlType T, int NR>
__device__ __forceinline__ void dot_step(const uint8_t* const (&rows)[NR], int64_t s, const float* __restrict__ x,
                                         int lane, float (&acc)[NR]) {
    const float* const xs[1] = {x};
    float a[NR][1];
#pragma unroll
    for (int i = 0; i < NR; ++i) a[i][0] = acc[i];
    dot_step_n<T, NR, 1>(rows, s, xs, lane, a);
#pragma unroll
    for (int i = 0; i < NR; ++i) acc[i] = a[i][0];
}

// Whether dot_step may read matrices of this type: rows of whole 256-element
// steps, and every row (at base + m * matrix_bytes + r * row_bytes) aligned
// for the widest load the type uses.
inline bool dot_step_usable(GgmlType type, int64_t k, const void* base, size_t matrix_bytes, size_t row_bytes) {
    if (k % 256 != 0) return false;
    size_t align = 1;
    switch (type) {
        case GgmlType::IQ2_XXS: case GgmlType::Q3_K: case GgmlType::Q6_K: case GgmlType::Q8_0: align = 2; break;
        case GgmlType::Q2_K: case GgmlType::Q4_K: align = 4; break;
        case GgmlType::F16: case GgmlType::F32: align = 16; break;
        default: return false;
    }
    return reinterpret_cast<uintptr_t>(base) % align == 0 && matrix_bytes % align == 0 && row_bytes % align == 0;
}

// The warp's copy of n16 16-byte chunks from src (global) to dst (shared), all
// issued before any is waited for (cp.async, no registers): a warp's whole
// expert rows are in flight at once instead of one 256-element step's bytes
// per HBM round trip (measured: 3-4 % faster kernels; they are issue-bound).
// warp_stage_wait waits for the lane's own copies, then __syncwarp makes
// every lane's visible to the warp.
__device__ __forceinline__ void warp_stage(uint4* dst, const uint4* src, int n16, int lane) {
    for (int i = lane; i < n16; i += 32) cp_async16(dst + i, src + i);
}
__device__ __forceinline__ void warp_stage_wait() {
    cp_async_wait_all();
    __syncwarp();
}

// Shared memory for staging n_rows rows through warp_stage, or 0 when the
// rows cannot be copied in 16-byte chunks (row length or alignment) or would
// not fit the default 48 KiB a block may take without opting in.
inline size_t stage_bytes(const uint8_t* a, const uint8_t* b, size_t matrix_bytes, size_t row_bytes, size_t n_rows) {
    const bool aligned = reinterpret_cast<uintptr_t>(a) % 16 == 0 && reinterpret_cast<uintptr_t>(b) % 16 == 0 &&
                         matrix_bytes % 16 == 0 && row_bytes % 16 == 0;
    const size_t bytes = row_bytes * n_rows;
    return aligned && bytes <= 48 * 1024 ? bytes : 0;
}

}  // namespace
}  // namespace ds4::cuda

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

#include "backend/cuda/quant_decode.cuh"

namespace ds4::cuda {
namespace {

template <GgmlType T>
constexpr bool kHasDotStep = T == GgmlType::IQ2_XXS || T == GgmlType::Q2_K || T == GgmlType::Q4_K ||
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

// acc[i] += lane's share of rows[i][256 s .. 256 s + 255] . x[256 s ..]; x is
// the start of the activation row (16-byte aligned, global memory); the rows
// may be in global or shared memory (plain loads, no __ldg, for that reason).
template <GgmlType T, int NR>
__device__ __forceinline__ void dot_step(const uint8_t* const (&rows)[NR], int64_t s, const float* __restrict__ x,
                                         int lane, float (&acc)[NR]) {
    if constexpr (T == GgmlType::IQ2_XXS) {
        // Super-block: d (f16), then 8 groups of 8 bytes (4 codebook indices, a
        // u32 of 4x7 sign bits and a 4-bit scale). Lane 4g + l: group g, index l
        // (8 elements 32 g + 8 l .. + 7).
        const int g = lane >> 2, l = lane & 3;
        const float* xb = x + s * 256 + 32 * g + 8 * l;
        const float4 x0 = ldx4(xb), x1 = ldx4(xb + 4);
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
            const float sum = term(0, x0.x) + term(1, x0.y) + term(2, x0.z) + term(3, x0.w) + term(4, x1.x) +
                              term(5, x1.y) + term(6, x1.z) + term(7, x1.w);
            acc[i] += db * sum;
        }
    } else if constexpr (T == GgmlType::Q2_K) {
        // Super-block: scales[16] (low nibble scale, high nibble min, per 16
        // elements), qs[64] (2 bits), d, dmin. Byte m of half h holds elements
        // 128 h + 32 p + m for planes p = 0..3. Lane 16 h + j: bytes 2j, 2j + 1
        // of half h, i.e. elements 128 h + 32 p + 2 j (+1), sub-scale 8 h + 2 p + (j >> 3).
        const int h = lane >> 4, j = lane & 15;
        const float* xb = x + s * 256 + 128 * h + 2 * j;
        float2 xv[4];
#pragma unroll
        for (int p = 0; p < 4; ++p) xv[p] = ldx2(xb + 32 * p);
        float sx[4];
#pragma unroll
        for (int p = 0; p < 4; ++p) sx[p] = xv[p].x + xv[p].y;
#pragma unroll
        for (int i = 0; i < NR; ++i) {
            const uint8_t* blk = rows[i] + s * 84;
            const uint32_t qq = *reinterpret_cast<const uint16_t*>(blk + 16 + 32 * h + 2 * j);
            const uint32_t s0 = *reinterpret_cast<const uint32_t*>(blk + 8 * h),
                           s1 = *reinterpret_cast<const uint32_t*>(blk + 8 * h + 4);
            const uint32_t dd = *reinterpret_cast<const uint32_t*>(blk + 80);
            const float d = __half2float(__ushort_as_half(uint16_t(dd & 0xFFFF))),
                        dmin = __half2float(__ushort_as_half(uint16_t(dd >> 16)));
            const int part = j >> 3;
            float sum = 0.0f;
#pragma unroll
            for (int p = 0; p < 4; ++p) {
                // scales byte 8 h + 2 p + part: in s0 for p < 2, s1 for p >= 2.
                const uint32_t sc = ((p < 2 ? s0 : s1) >> (8 * (2 * (p & 1) + part))) & 0xFFu;
                const float dl = __fmul_rn(d, small_u2f(sc & 0xF)), ml = __fmul_rn(dmin, small_u2f(sc >> 4));
                const float q0 = small_u2f((qq >> (2 * p)) & 3u), q1 = small_u2f((qq >> (8 + 2 * p)) & 3u);
                sum += dl * (q0 * xv[p].x + q1 * xv[p].y) - ml * sx[p];
            }
            acc[i] += sum;
        }
    } else if constexpr (T == GgmlType::Q4_K) {
        const int p = lane >> 3, q4 = lane & 7;  // sub-block pair p, bytes 4 q4 .. 4 q4 + 3 of its 32
        const float* xb = x + s * 256 + 64 * p + 4 * q4;
        const float4 x0 = ldx4(xb), x1 = ldx4(xb + 32);
        const float sx0 = x0.x + x0.y + x0.z + x0.w, sx1 = x1.x + x1.y + x1.z + x1.w;
#pragma unroll
        for (int i = 0; i < NR; ++i) {
            const uint8_t* blk = rows[i] + s * 144;
            const uint32_t q = *reinterpret_cast<const uint32_t*>(blk + 16 + 32 * p + 4 * q4);
            const uint32_t hw = *reinterpret_cast<const uint32_t*>(blk);
            const uint32_t w0 = *reinterpret_cast<const uint32_t*>(blk + 4),
                           w1 = *reinterpret_cast<const uint32_t*>(blk + 8),
                           w2 = *reinterpret_cast<const uint32_t*>(blk + 12);
            auto byte = [&](int n) { return int(((n < 4 ? w0 : n < 8 ? w1 : w2) >> (8 * (n & 3))) & 0xFF); };
            int sc0, m0, sc1, m1;
            k_scale_min_of(2 * p, byte, sc0, m0);
            k_scale_min_of(2 * p + 1, byte, sc1, m1);
            const float d = __half2float(__ushort_as_half(uint16_t(hw & 0xFFFF))),
                        dmin = __half2float(__ushort_as_half(uint16_t(hw >> 16)));
            const float a0 = __fmul_rn(d, small_u2f(sc0)), b0 = __fmul_rn(dmin, small_u2f(m0));
            const float a1 = __fmul_rn(d, small_u2f(sc1)), b1 = __fmul_rn(dmin, small_u2f(m1));
            const float s0 = small_u2f(q & 0xF) * x0.x + small_u2f((q >> 8) & 0xF) * x0.y +
                             small_u2f((q >> 16) & 0xF) * x0.z + small_u2f((q >> 24) & 0xF) * x0.w;
            const float s1 = small_u2f((q >> 4) & 0xF) * x1.x + small_u2f((q >> 12) & 0xF) * x1.y +
                             small_u2f((q >> 20) & 0xF) * x1.z + small_u2f(q >> 28) * x1.w;
            acc[i] += (a0 * s0 - b0 * sx0) + (a1 * s1 - b1 * sx1);
        }
    } else if constexpr (T == GgmlType::Q6_K) {
        const int h = lane >> 4, m = lane & 15;  // half h, element pair 2m, 2m+1 of each quarter
        const float* xb = x + s * 256 + 128 * h + 2 * m;
        float2 xv[4];
#pragma unroll
        for (int qd = 0; qd < 4; ++qd) xv[qd] = ldx2(xb + 32 * qd);
#pragma unroll
        for (int i = 0; i < NR; ++i) {
            const uint8_t* blk = rows[i] + s * 210;
            const uint32_t la = *reinterpret_cast<const uint16_t*>(blk + 64 * h + 2 * m);
            const uint32_t lb = *reinterpret_cast<const uint16_t*>(blk + 64 * h + 32 + 2 * m);
            const uint32_t hv = *reinterpret_cast<const uint16_t*>(blk + 128 + 32 * h + 2 * m);
            const float d = half_at(blk + 208);
            const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192 + 8 * h + (m >> 3));
            float qv[4][2];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const uint32_t a = (la >> (8 * e)) & 0xFF, bb = (lb >> (8 * e)) & 0xFF, hb = (hv >> (8 * e)) & 0xFF;
                qv[0][e] = small_u2f_minus<32>((a & 0xF) | ((hb & 3) << 4));
                qv[1][e] = small_u2f_minus<32>((bb & 0xF) | (((hb >> 2) & 3) << 4));
                qv[2][e] = small_u2f_minus<32>((a >> 4) | (((hb >> 4) & 3) << 4));
                qv[3][e] = small_u2f_minus<32>((bb >> 4) | (((hb >> 6) & 3) << 4));
            }
#pragma unroll
            for (int qd = 0; qd < 4; ++qd)
                acc[i] += __fmul_rn(d, s8_to_f(uint8_t(sc[2 * qd]))) * (qv[qd][0] * xv[qd].x + qv[qd][1] * xv[qd].y);
        }
    } else if constexpr (T == GgmlType::Q8_0) {
        const int bi = lane >> 2, quarter = lane & 3;  // block bi of the step's 8, elements 8 quarter .. + 7
        const int64_t b = 8 * s + bi;
        const float* xb = x + b * 32 + 8 * quarter;
        const float4 x0 = ldx4(xb), x1 = ldx4(xb + 4);
#pragma unroll
        for (int i = 0; i < NR; ++i) {
            const uint8_t* blk = rows[i] + b * 34;
            const uint16_t* q = reinterpret_cast<const uint16_t*>(blk + 2 + 8 * quarter);
            const uint32_t w0 = q[0], w1 = q[1], w2 = q[2], w3 = q[3];
            const float d = half_at(blk);
            const float sum = s8_to_f(w0) * x0.x + s8_to_f(w0 >> 8) * x0.y + s8_to_f(w1) * x0.z +
                              s8_to_f(w1 >> 8) * x0.w + s8_to_f(w2) * x1.x + s8_to_f(w2 >> 8) * x1.y +
                              s8_to_f(w3) * x1.z + s8_to_f(w3 >> 8) * x1.w;
            acc[i] += d * sum;
        }
    } else if constexpr (T == GgmlType::F16) {
        const int64_t e0 = 256 * s + 8 * lane;  // one 16-byte load of 8 halves per lane and row
        const float4 x0 = ldx4(x + e0), x1 = ldx4(x + e0 + 4);
#pragma unroll
        for (int i = 0; i < NR; ++i) {
            const uint4 v = *reinterpret_cast<const uint4*>(rows[i] + 2 * e0);  // global or staged in shared
            const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&v.x)),
                         b = __half22float2(*reinterpret_cast<const __half2*>(&v.y)),
                         c = __half22float2(*reinterpret_cast<const __half2*>(&v.z)),
                         d = __half22float2(*reinterpret_cast<const __half2*>(&v.w));
            acc[i] += a.x * x0.x + a.y * x0.y + b.x * x0.z + b.y * x0.w + c.x * x1.x + c.y * x1.y + d.x * x1.z +
                      d.y * x1.w;
        }
    } else if constexpr (T == GgmlType::F32) {
        const int64_t e0 = 256 * s + 8 * lane;
        const float4 x0 = ldx4(x + e0), x1 = ldx4(x + e0 + 4);
#pragma unroll
        for (int i = 0; i < NR; ++i) {
            const float* wr = reinterpret_cast<const float*>(rows[i]);
            const float4 w0 = *reinterpret_cast<const float4*>(wr + e0);  // global or staged in shared
            const float4 w1 = *reinterpret_cast<const float4*>(wr + e0 + 4);
            acc[i] += w0.x * x0.x + w0.y * x0.y + w0.z * x0.z + w0.w * x0.w + w1.x * x1.x + w1.y * x1.y +
                      w1.z * x1.z + w1.w * x1.w;
        }
    }
}

// Whether dot_step may read matrices of this type: rows of whole 256-element
// steps, and every row (at base + m * matrix_bytes + r * row_bytes) aligned
// for the widest load the type uses.
inline bool dot_step_usable(GgmlType type, int64_t k, const void* base, size_t matrix_bytes, size_t row_bytes) {
    if (k % 256 != 0) return false;
    size_t align = 1;
    switch (type) {
        case GgmlType::IQ2_XXS: case GgmlType::Q6_K: case GgmlType::Q8_0: align = 2; break;
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
    for (int i = lane; i < n16; i += 32) {
        const unsigned d = unsigned(__cvta_generic_to_shared(dst + i));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src + i) : "memory");
    }
}
__device__ __forceinline__ void warp_stage_wait() {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
    __syncwarp();
}

}  // namespace
}  // namespace ds4::cuda

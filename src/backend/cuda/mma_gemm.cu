// Prefill products on the tensor cores: y = W x for many tokens, W decoded
// from its ggml blocks to f16 inside the GEMM's main loop (no decoded copy of
// the weights in device memory), x rounded to f16 after a power-of-two scale
// per token, f32 accumulation (mma.sync m16n8k16). The FP32 path (decode to
// float + cuBLAS SGEMM) stays for --exact.
//
// Why our own kernel and not a library: the weights are ggml blocks (Q4_K,
// Q6_K, IQ2_XXS, ...) that CUTLASS and cuBLAS cannot read; decoding them
// first to a dense copy costs 2 bytes a weight written and read again for
// every chunk (all 128 experts of a Qwen3 layer: 0.6 GB per matrix kind).
//
// Numerics: a weight is its exact decoded value rounded to f16 (11
// significant bits); an activation is x / 2^e rounded to f16, with 2^e
// bringing the token's largest magnitude into [2^14, 2^15), so no value
// overflows; only values below ~2^-28 of the largest fall into f16's
// subnormals (fewer bits), below ~2^-39 of it to zero. The product is then
// multiplied by 2^e exactly.
// llama.cpp's prefill rounds activations to 8 bits per block of 32.
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/env_switch.h"
#include "backend/cuda/mma_f16.cuh"
#include "backend/cuda/quant_decode.cuh"
#include "backend/cuda/warp_dot.cuh"  // small_u2f, small_u2f_minus, s8_to_f: exact conversions without I2F

namespace ds4::cuda {
namespace {

constexpr int kBM = 64;   // weight rows a block computes
constexpr int kBN = 64;   // tokens a block computes (kGemmTileTokens)
constexpr int kBK = 256;  // elements of k per main-loop step: one K-quant super-block, eight 32-blocks
constexpr int kLds = kBK + 8;  // decoded row stride in halves: 528 bytes, so ldmatrix's 8 rows hit 8 bank groups
constexpr int kThreads = 128;  // 4 warps, 2 x 2, each 32 rows x 32 tokens
static_assert(kBN == kGemmTileTokens, "the host's tile lists and the kernel agree on tokens per tile");
static_assert(kBK == kHalfRowAlign, "activation rows are padded to whole main-loop steps");

// The raw bytes of one main-loop step of a weight row: 256 elements.
template <GgmlType T>
struct Step {
    static constexpr int qk = Layout<T>::qk;
    static constexpr int bytes = kBK / qk * Layout<T>::bytes;
    static constexpr int stride = (bytes + 15) / 16 * 16;  // shared-memory row stride
};
template <GgmlType T>
constexpr size_t smem_bytes() {
    return size_t(kBM) * Step<T>::stride + size_t(kBM + kBN) * kLds * sizeof(__half);
}

// Starts the copy of G bytes (4 or 16; G-aligned) from global to shared memory.
template <int G>
__device__ __forceinline__ void cp_async(void* dst, const void* src) {
    if constexpr (G == 16)
        cp_async16(dst, src);
    else
        cp_async4(dst, src);
}

// One block per row: xh[r] = x[rows ? rows[r] : r] / scale[r] as f16, zero
// padded to ld_h; scale[r] a power of two (see the file's comment).
__global__ void rows_to_half_kernel(const float* __restrict__ x, int64_t ld_x, const int32_t* __restrict__ rows,
                                    int64_t k, __half* __restrict__ xh, int64_t ld_h, float* __restrict__ scale) {
    wait_for_inputs();
    const int64_t r = blockIdx.x;
    const float* src = x + (rows ? int64_t(rows[r]) : r) * ld_x;
    float m = 0.0f;
    for (int64_t i = threadIdx.x; i < k; i += blockDim.x) m = fmaxf(m, fabsf(src[i]));
    __shared__ float part[32];
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = m;
    __syncthreads();
    m = 0.0f;
    for (int w = 0; w < int(blockDim.x >> 5); ++w) m = fmaxf(m, part[w]);
    // m = f 2^e with f in [0.5, 1): dividing by 2^(e - 15) puts m in [2^14, 2^15).
    // Infinite and NaN rows keep scale 1 (they stay what they are); tiny rows
    // stop at 2^-100 so that 1 / scale stays finite.
    int e = 0;
    float s = 1.0f;
    if (m > 0.0f && isfinite(m)) {
        frexpf(m, &e);
        s = ldexpf(1.0f, max(e - 15, -100));
    }
    const float inv = 1.0f / s;  // exact: a power of two
    __half* dst = xh + r * ld_h;
    for (int64_t i = threadIdx.x; i < ld_h; i += blockDim.x) dst[i] = __float2half_rn(i < k ? src[i] * inv : 0.0f);
    if (threadIdx.x == 0) scale[r] = s;
}

// ---- 32 elements of a raw block in shared memory to f16 -------------------
// The CPU's decoded values (the same float expressions as decode<T>), each
// rounded to f16, two a conversion. The hot types have their own: decode<T>
// element by element recomputes each element's block scales (ncu, 2026-12-04:
// the Q4_K expert gate GEMM issue-bound at 2.1 IPC for 870 us, which counts
// out to ~75 instructions an element).

template <GgmlType T>
struct ChunkDecoder {
    // blk: the block holding elements [off, off + 32); 2-byte aligned.
    __device__ static __forceinline__ void run(const uint8_t* blk, int off, __half2 (&v)[16]) {
#pragma unroll
        for (int j = 0; j < 16; ++j)
            v[j] = __floats2half2_rn(decode<T>(blk, off + 2 * j), decode<T>(blk, off + 2 * j + 1));
    }
};

// Q4_K: sub-block off / 32 of a 16-byte aligned block (one block a step).
template <>
struct ChunkDecoder<GgmlType::Q4_K> {
    __device__ static __forceinline__ void run(const uint8_t* blk, int off, __half2 (&v)[16]) {
        const int sub = off >> 5, pair = sub >> 1, shift = 4 * (sub & 1);
        int sc, m;
        k_scale_min(sub, blk + 4, sc, m);
        const float a = __fmul_rn(half_at(blk), float(sc)), b = __fmul_rn(half_at(blk + 2), float(m));
        const uint32_t* q = reinterpret_cast<const uint32_t*>(blk + 16 + 32 * pair);
#pragma unroll
        for (int w = 0; w < 8; ++w) {
            const uint32_t word = q[w] >> shift;
            float f[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) f[e] = __fsub_rn(__fmul_rn(a, small_u2f((word >> (8 * e)) & 0xFu)), b);
            v[2 * w] = __floats2half2_rn(f[0], f[1]);
            v[2 * w + 1] = __floats2half2_rn(f[2], f[3]);
        }
    }
};

// Q6_K: elements 32 c .. 32 c + 31 of a 16-byte aligned block: half c / 4,
// quad c % 4; the first 16 take one scale, the next 16 the next.
template <>
struct ChunkDecoder<GgmlType::Q6_K> {
    __device__ static __forceinline__ void run(const uint8_t* blk, int off, __half2 (&v)[16]) {
        const int c = off >> 5, half = c >> 2, quad = c & 3;
        const uint32_t* ql = reinterpret_cast<const uint32_t*>(blk + 64 * half + 32 * (quad & 1));
        const uint32_t* qh = reinterpret_cast<const uint32_t*>(blk + 128 + 32 * half);
        const float d = half_at(blk + 208);
        const float a0 = __fmul_rn(d, float(int8_t(blk[192 + 8 * half + 2 * quad])));
        const float a1 = __fmul_rn(d, float(int8_t(blk[192 + 8 * half + 2 * quad + 1])));
        const int lo_shift = (quad & 2) ? 4 : 0, hi_shift = 2 * quad;
#pragma unroll
        for (int w = 0; w < 8; ++w) {
            const uint32_t lw = ql[w] >> lo_shift, hw = qh[w] >> hi_shift;
            const float a = w < 4 ? a0 : a1;
            float f[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const uint32_t q = ((lw >> (8 * e)) & 0xFu) | (((hw >> (8 * e)) & 3u) << 4);
                f[e] = __fmul_rn(a, small_u2f_minus<32>(q));
            }
            v[2 * w] = __floats2half2_rn(f[0], f[1]);
            v[2 * w + 1] = __floats2half2_rn(f[2], f[3]);
        }
    }
};

// Q8_0: one 34-byte block (2-byte aligned).
template <>
struct ChunkDecoder<GgmlType::Q8_0> {
    __device__ static __forceinline__ void run(const uint8_t* blk, int, __half2 (&v)[16]) {
        const float d = half_at(blk);
        const uint16_t* q = reinterpret_cast<const uint16_t*>(blk + 2);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            const uint16_t p = q[j];
            v[j] = __floats2half2_rn(s8_to_f(p) * d, s8_to_f(p >> 8) * d);
        }
    }
};

// Q2_K: elements 32 c .. 32 c + 31 of a 16-byte aligned block: half c / 4,
// plane c % 4; the first 16 take one scale byte, the next 16 the next.
template <>
struct ChunkDecoder<GgmlType::Q2_K> {
    __device__ static __forceinline__ void run(const uint8_t* blk, int off, __half2 (&v)[16]) {
        const int c = off >> 5, half = c >> 2, plane = c & 3;
        const uint32_t* q = reinterpret_cast<const uint32_t*>(blk + 16 + 32 * half);
        const float d = half_at(blk + 80), dmin = half_at(blk + 82);
#pragma unroll
        for (int part = 0; part < 2; ++part) {
            const int sc = blk[half * 8 + plane * 2 + part];
            const float dl = __fmul_rn(d, float(sc & 0xF)), ml = __fmul_rn(dmin, float(sc >> 4));
#pragma unroll
            for (int w = 0; w < 4; ++w) {
                const uint32_t word = q[4 * part + w] >> (2 * plane);
                float f[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) f[e] = __fsub_rn(__fmul_rn(dl, small_u2f((word >> (8 * e)) & 3u)), ml);
                v[8 * part + 2 * w] = __floats2half2_rn(f[0], f[1]);
                v[8 * part + 2 * w + 1] = __floats2half2_rn(f[2], f[3]);
            }
        }
    }
};

// IQ2_XXS: group off / 32 (8 bytes: four grid indices, then signs and scale).
template <>
struct ChunkDecoder<GgmlType::IQ2_XXS> {
    __device__ static __forceinline__ void run(const uint8_t* blk, int off, __half2 (&v)[16]) {
        const uint8_t* q = blk + 2 + 8 * (off >> 5);
        const uint32_t codes = u32(q + 4);
        const float db = __fmul_rn(__fmul_rn(half_at(blk), __fadd_rn(0.5f, float(codes >> 28))), 0.25f);
#pragma unroll
        for (int l = 0; l < 4; ++l) {
            const uint32_t c7 = (codes >> (7 * l)) & 127u;
            const uint32_t signs = c7 | ((__popc(c7) & 1u) << 7);
            const uint64_t grid = g_iq2xxs_grid[q[l]];
            float f[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const float val = __fmul_rn(db, small_u2f(uint32_t(grid >> (8 * e)) & 0xFFu));
                f[e] = (signs >> e) & 1 ? -val : val;
            }
#pragma unroll
            for (int e = 0; e < 4; ++e) v[4 * l + e] = __floats2half2_rn(f[2 * e], f[2 * e + 1]);
        }
    }
};

// y[row0 + t][m] = scale[row0 + t] * sum_i W_matrix[m][i] xh[row0 + t][i] for
// the tokens t < n of one tile: blockIdx.y's entry of `tiles` (matrix, row0,
// n), or without tiles token rows [64 blockIdx.y, ...) of n_tok and matrix 0.
// blockIdx.x: 64 weight rows. Each step of 256 elements: the weight rows'
// raw bytes and the activations go to shared memory by cp.async (G bytes a
// copy, coalesced: consecutive threads, consecutive bytes of a row), the
// raw blocks are decoded there to f16 (32 elements a thread at a time, so a
// block's scales are read once per 32), then 16 k-steps of mma.
// G: 16 when every row's step starts 16-byte aligned, else 4 or 2 (plain loads).
template <GgmlType T, int G>
__global__ void __launch_bounds__(kThreads) gemm_f16_kernel(const uint8_t* __restrict__ w, size_t matrix_bytes,
                                                            size_t row_bytes, int64_t k, int64_t n_rows,
                                                            const int32_t* __restrict__ tiles, int64_t n_tok,
                                                            const __half* __restrict__ xh, int64_t ld_h,
                                                            const float* __restrict__ scale, float* __restrict__ y,
                                                            int64_t ld_y) {
    using S = Step<T>;
    extern __shared__ __align__(16) uint8_t smem[];
    uint8_t* raw = smem;
    __half* ws = reinterpret_cast<__half*>(smem + size_t(kBM) * S::stride);
    __half* xs = ws + kBM * kLds;
    wait_for_inputs();
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int64_t m0 = int64_t(blockIdx.x) * kBM;
    const GemmTile tile = gemm_tile(tiles, n_tok, kBN);
    if (tile.nt <= 0) return;
    const int64_t mat = tile.mat, t0 = tile.t0, nt = tile.nt;
    const int rows_here = int(min(int64_t(kBM), n_rows - m0));
    const uint8_t* wm = w + size_t(mat) * matrix_bytes + size_t(m0) * row_bytes;
    const int wm0 = (warp & 1) * 32, wn0 = (warp >> 1) * 32;
    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;

    for (int64_t k0 = 0; k0 < k; k0 += kBK) {
        const int n_elems = int(min(int64_t(kBK), k - k0));  // a multiple of 32 (and of qk)
        const int step_bytes = n_elems / S::qk * Layout<T>::bytes;
        const uint8_t* src = wm + size_t(k0 / S::qk) * Layout<T>::bytes;
        __syncthreads();  // every warp is done with the previous step's tiles
        // Activations: 64 tokens x 256 halves; rows past the tile are zeros.
        for (int p = tid; p < kBN * kBK / 8; p += kThreads) {
            const int n = p >> 5, c = (p & 31) * 8;
            __half* dst = xs + n * kLds + c;
            if (n < nt)
                cp_async<16>(dst, xh + (t0 + n) * ld_h + k0 + c);
            else
                *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
        }
        // Weights: the step's bytes of each row, G bytes a copy.
        const int per_row = step_bytes / G;
        for (int p = tid; p < rows_here * per_row; p += kThreads) {
            const int r = p / per_row, q = p - r * per_row;
            const uint8_t* s = src + size_t(r) * row_bytes + size_t(q) * G;
            uint8_t* d = raw + r * S::stride + q * G;
            if constexpr (G >= 4)
                cp_async<G>(d, s);
            else
                *reinterpret_cast<uint16_t*>(d) = *reinterpret_cast<const uint16_t*>(s);
        }
        cp_async_wait_all();
        __syncthreads();
        // Decode: 64 rows x 8 chunks of 32 elements, 4 chunks a thread.
#pragma unroll 1
        for (int p = tid; p < kBM * (kBK / 32); p += kThreads) {
            const int r = p >> 3, c = p & 7;
            __align__(16) __half2 v[16];
            if (r < rows_here && 32 * c < n_elems) {
                const uint8_t* blk;
                int off;  // the chunk's first element inside its block
                if constexpr (S::qk >= 32) {
                    blk = raw + r * S::stride + (32 * c / S::qk) * Layout<T>::bytes;
                    off = (32 * c) % S::qk;
                } else {
                    blk = raw + r * S::stride;
                    off = 32 * c;
                }
                ChunkDecoder<T>::run(blk, off, v);
            } else {
#pragma unroll
                for (int j = 0; j < 16; ++j) v[j] = __floats2half2_rn(0.0f, 0.0f);
            }
            uint4* dst = reinterpret_cast<uint4*>(ws + r * kLds + 32 * c);
#pragma unroll
            for (int q = 0; q < 4; ++q) dst[q] = reinterpret_cast<const uint4*>(v)[q];
        }
        __syncthreads();
#pragma unroll 4
        for (int kk = 0; kk < kBK; kk += 16) {
            uint32_t a[2][4], b[4][2];
#pragma unroll
            for (int i = 0; i < 2; ++i) ldmatrix_x4(a[i], ws + (wm0 + 16 * i + (lane & 15)) * kLds + kk + (lane >> 4) * 8);
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                uint32_t r4[4];
                ldmatrix_x4(r4, xs + (wn0 + 16 * j + (lane & 7) + ((lane >> 4) << 3)) * kLds + kk + ((lane >> 3) & 1) * 8);
                b[2 * j][0] = r4[0];
                b[2 * j][1] = r4[1];
                b[2 * j + 1][0] = r4[2];
                b[2 * j + 1][1] = r4[3];
            }
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) mma_16816(acc[i][j], a[i], b[j][0], b[j][1]);
        }
    }
    // c0, c1: weight row g, tokens 2 tg and 2 tg + 1; c2, c3: row g + 8.
    const int g = lane >> 2, tg = lane & 3;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int64_t m = m0 + wm0 + 16 * i + g + 8 * (c >> 1);
                const int n = wn0 + 8 * j + 2 * tg + (c & 1);
                if (n < nt && m < n_rows) y[(t0 + n) * ld_y + m] = acc[i][j][c] * scale[t0 + n];
            }
}

}  // namespace

void init_mma_gemm_tables() { upload_decode_tables(); }

bool gemm_f16_supported(GgmlType type, int64_t k) {
    // F32 rows (routers, small projections) and BF16 (f16 lacks its range) keep the FP32 path.
    return type != GgmlType::F32 && type != GgmlType::BF16 && k % 32 == 0 && quant_type_supported(type);
}

int64_t half_row_stride(int64_t k) { return (k + kHalfRowAlign - 1) / kHalfRowAlign * kHalfRowAlign; }

void rows_to_half(const float* x, int64_t ld_x, const int32_t* rows, int64_t n, int64_t k, uint16_t* xh,
                  int64_t ld_h, float* scale, cudaStream_t stream) {
    if (n <= 0) return;
    if (ld_h < k || ld_h % kHalfRowAlign != 0) throw Error("CUDA rows_to_half: bad half row stride.");
    if (n > 0x7fffffff) throw Error("CUDA rows_to_half: too many rows.");
    launch(rows_to_half_kernel, dim3(unsigned(n)), dim3(256), 0, stream, x, ld_x, rows, k,
           reinterpret_cast<__half*>(xh), ld_h, scale);
}

namespace {

template <GgmlType T, int G>
void launch_gemm(dim3 grid, cudaStream_t stream, const uint8_t* w, size_t matrix_bytes, size_t row_bytes, int64_t k,
                 int64_t n_rows, const int32_t* tiles, int64_t n_tok, const __half* xh, int64_t ld_h,
                 const float* scale, float* y, int64_t ld_y) {
    constexpr size_t smem = smem_bytes<T>();
    static const bool attr = [] {  // once per instantiation (and device: ds4 uses one)
        check(cudaFuncSetAttribute(gemm_f16_kernel<T, G>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
              "raising gemm_f16_kernel's shared memory");
        return true;
    }();
    (void)attr;
    launch(gemm_f16_kernel<T, G>, grid, dim3(kThreads), smem, stream, w, matrix_bytes, row_bytes, k, n_rows, tiles,
           n_tok, xh, ld_h, scale, y, ld_y);
}

}  // namespace

void gemm_f16(GgmlType type, const uint8_t* w, size_t matrix_bytes, size_t row_bytes, int64_t k, int64_t n_rows,
              const int32_t* tiles, int64_t n_tiles, int64_t n_tok, const uint16_t* xh, int64_t ld_h,
              const float* scale, float* y, int64_t ld_y, cudaStream_t stream) {
    if (n_rows <= 0 || k <= 0) return;
    if (!gemm_f16_supported(type, k)) throw Error("CUDA gemm_f16: unsupported weight type or row length.");
    // Q4_K and Q6_K rows decoded straight into the mma fragments (gemm_frag.cu):
    // opt-in (DS4_CUDA_GEMM_FRAG=1) until it has run on a GPU. Read once.
    static const bool frag = env_switch("DS4_CUDA_GEMM_FRAG", false);
    if (frag && gemm_frag_usable(type, w, matrix_bytes, row_bytes, k)) {
        gemm_frag(type, w, matrix_bytes, row_bytes, k, n_rows, tiles, n_tiles, n_tok, xh, ld_h, scale, y, ld_y, stream);
        return;
    }
    if (!tiles) n_tiles = (n_tok + kBN - 1) / kBN;
    if (n_tiles <= 0) return;
    if (n_tiles > 65535) throw Error("CUDA gemm_f16: more than 65535 token tiles in one call.");
    if ((n_rows + kBM - 1) / kBM > 0x7fffffff) throw Error("CUDA gemm_f16: too many weight rows.");
    const dim3 grid(unsigned((n_rows + kBM - 1) / kBM), unsigned(n_tiles));
    const auto* h = reinterpret_cast<const __half*>(xh);
    dispatch_type(type, [&](auto t) {
        constexpr GgmlType T = decltype(t)::value;
        // The widest copy every row's every step allows: all of the matrix
        // base, row and matrix strides, the step's offset and a tail step's
        // length (whole blocks) are multiples of it. Block sizes are even.
        const size_t step_stride = size_t(Step<T>::bytes), tail = size_t(Layout<T>::bytes);
        const size_t all = reinterpret_cast<uintptr_t>(w) | row_bytes | matrix_bytes | step_stride |
                           (k % kBK ? tail : step_stride);
        if (all % 16 == 0)
            launch_gemm<T, 16>(grid, stream, w, matrix_bytes, row_bytes, k, n_rows, tiles, n_tok, h, ld_h, scale, y, ld_y);
        else if (all % 4 == 0)
            launch_gemm<T, 4>(grid, stream, w, matrix_bytes, row_bytes, k, n_rows, tiles, n_tok, h, ld_h, scale, y, ld_y);
        else
            launch_gemm<T, 2>(grid, stream, w, matrix_bytes, row_bytes, k, n_rows, tiles, n_tok, h, ld_h, scale, y, ld_y);
    });
}

}  // namespace ds4::cuda

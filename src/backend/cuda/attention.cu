// Causal grouped-query attention over the float KV cache, and the cache
// store. Positions come from device memory, so a recorded decode step
// attends to the right number of keys at every replay.
//
// Split-K: query row t, head h is cut into n_split key ranges (blocks of
// kAttnWarps warps, each warp an online softmax over a strided share of its
// range); with n_split > 1 each block writes its unnormalised partial result
// and a second kernel merges them. Decode has one query row, so the split is
// what fills the GPU (n_head blocks alone would use a quarter of it).
#include <algorithm>
#include <cfloat>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"

namespace ds4::cuda {
namespace {

constexpr int kAttnWarps = 4;
constexpr int kKeysInFlight = 4;
// Decode splits the keys until a block holds ~kMinKeysPerSplit of them (a
// group of kKeysInFlight per warp): its time is a few cache round trips,
// not one per key. Up to kTargetBlocks blocks (eight waves of the H200's
// 132 SMs); the merge kernel reads every split's partial result.
constexpr int kTargetBlocks = 8 * 132;
constexpr int kMinKeysPerSplit = 32;

struct AttnArgs {
    int n_head, n_head_kv, dk, dv;
    float scale;
    int64_t ld_q, ld_k, ld_v, ld_o;
    int n_split;
};

// DPL: head-dimension elements per lane (dk, dv <= 32 * DPL).
template <int DPL>
__global__ void attention_kernel(const float* __restrict__ q, const float* __restrict__ kc,
                                 const float* __restrict__ vc, const int32_t* __restrict__ positions,
                                 const int32_t* __restrict__ slots, int64_t slot_rows, AttnArgs a,
                                 float* __restrict__ out, float* __restrict__ part_o, float* __restrict__ part_ml) {
    wait_for_inputs();
    const int64_t t = blockIdx.x / a.n_head;
    // The row's own sequence: its slot's part of the caches.
    kc += int64_t(slots[t]) * slot_rows * a.ld_k;
    vc += int64_t(slots[t]) * slot_rows * a.ld_v;
    const int h = int(blockIdx.x % a.n_head);
    const int split = blockIdx.y;
    const int hk = h / (a.n_head / a.n_head_kv);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t n_kv = int64_t(positions[t]) + 1;
    const int64_t per = (n_kv + a.n_split - 1) / a.n_split;
    const int64_t j0 = int64_t(split) * per, j1 = min(n_kv, j0 + per);

    const float* qv = q + t * a.ld_q + int64_t(h) * a.dk;
    float qr[DPL], acc[DPL];
#pragma unroll
    for (int c = 0; c < DPL; ++c) {
        const int d = lane + 32 * c;
        qr[c] = d < a.dk ? qv[d] : 0.0f;
        acc[c] = 0.0f;
    }
    float m = -FLT_MAX, l = 0.0f;
    // kKeysInFlight consecutive keys per warp at a time, every K and V load
    // of the group issued before the first is used: one key per iteration
    // waited twice per key for the cache (a decode step spent ~20 us per
    // layer here at any context, H200 ncu, 2026-12-02).
    for (int64_t jg = j0 + int64_t(warp) * kKeysInFlight; jg < j1; jg += int64_t(kAttnWarps) * kKeysInFlight) {
        float kr[kKeysInFlight][DPL], vr[kKeysInFlight][DPL];
#pragma unroll
        for (int u = 0; u < kKeysInFlight; ++u) {
            const int64_t j = jg + u < j1 ? jg + u : jg;  // past the range: a repeat, not used
            const float* kv = kc + j * a.ld_k + int64_t(hk) * a.dk;
            const float* vv = vc + j * a.ld_v + int64_t(hk) * a.dv;
#pragma unroll
            for (int c = 0; c < DPL; ++c) {
                const int d = lane + 32 * c;
                kr[u][c] = d < a.dk ? kv[d] : 0.0f;
                vr[u][c] = d < a.dv ? vv[d] : 0.0f;
            }
        }
        float sc[kKeysInFlight];
#pragma unroll
        for (int u = 0; u < kKeysInFlight; ++u) {
            float s = 0.0f;
#pragma unroll
            for (int c = 0; c < DPL; ++c) s += qr[c] * kr[u][c];
            sc[u] = s;
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
#pragma unroll
            for (int u = 0; u < kKeysInFlight; ++u) sc[u] += __shfl_xor_sync(0xffffffffu, sc[u], off);
#pragma unroll
        for (int u = 0; u < kKeysInFlight; ++u) {
            if (jg + u >= j1) break;
            const float s = sc[u] * a.scale;
            const float m_new = fmaxf(m, s);
            const float corr = expf(m - m_new), p = expf(s - m_new);
            l = l * corr + p;
#pragma unroll
            for (int c = 0; c < DPL; ++c) acc[c] = acc[c] * corr + p * vr[u][c];
            m = m_new;
        }
    }
    // Merge the warps: rescale each to the common maximum (a warp with no
    // keys has l = 0 and contributes nothing).
    __shared__ float sm[kAttnWarps], sl[kAttnWarps];
    __shared__ float sacc[kAttnWarps][32 * DPL];
    if (lane == 0) {
        sm[warp] = m;
        sl[warp] = l;
    }
#pragma unroll
    for (int c = 0; c < DPL; ++c) sacc[warp][lane + 32 * c] = acc[c];
    __syncthreads();
    float mx = -FLT_MAX;
    for (int w = 0; w < kAttnWarps; ++w) mx = fmaxf(mx, sm[w]);
    float total = 0.0f;
    for (int w = 0; w < kAttnWarps; ++w) total += sl[w] * expf(sm[w] - mx);
    if (a.n_split == 1) {
        float* o = out + t * a.ld_o + int64_t(h) * a.dv;
        for (int d = threadIdx.x; d < a.dv; d += blockDim.x) {
            float v = 0.0f;
            for (int w = 0; w < kAttnWarps; ++w) v += sacc[w][d] * expf(sm[w] - mx);
            o[d] = v / total;
        }
        return;
    }
    const int64_t slot = int64_t(blockIdx.x) * a.n_split + split;
    float* po = part_o + slot * a.dv;
    for (int d = threadIdx.x; d < a.dv; d += blockDim.x) {
        float v = 0.0f;
        for (int w = 0; w < kAttnWarps; ++w) v += sacc[w][d] * expf(sm[w] - mx);
        po[d] = v;
    }
    if (threadIdx.x == 0) {
        part_ml[2 * slot] = mx;
        part_ml[2 * slot + 1] = total;
    }
}

// One block per (query row, head): merges its n_split partial results.
__global__ void attention_merge_kernel(const float* __restrict__ part_o, const float* __restrict__ part_ml, AttnArgs a,
                                       float* __restrict__ out) {
    wait_for_inputs();
    const int64_t t = blockIdx.x / a.n_head;
    const int h = int(blockIdx.x % a.n_head);
    const int64_t base = int64_t(blockIdx.x) * a.n_split;
    float mx = -FLT_MAX;
    for (int s = 0; s < a.n_split; ++s)
        if (part_ml[2 * (base + s) + 1] > 0.0f) mx = fmaxf(mx, part_ml[2 * (base + s)]);
    float total = 0.0f;
    for (int s = 0; s < a.n_split; ++s) {
        const float l = part_ml[2 * (base + s) + 1];
        if (l > 0.0f) total += l * expf(part_ml[2 * (base + s)] - mx);
    }
    float* o = out + t * a.ld_o + int64_t(h) * a.dv;
    for (int d = threadIdx.x; d < a.dv; d += blockDim.x) {
        float v = 0.0f;
        for (int s = 0; s < a.n_split; ++s) {
            const float l = part_ml[2 * (base + s) + 1];
            if (l > 0.0f) v += part_o[(base + s) * a.dv + d] * expf(part_ml[2 * (base + s)] - mx);
        }
        o[d] = v / total;
    }
}

// Row t of k/v goes to cache row slots[t] * slot_rows + positions[t]; rows
// outside their slot or the cache are dropped (the session checks positions
// before a step runs).
__global__ void kv_store_kernel(const float* __restrict__ k, int64_t k_cols, const float* __restrict__ v,
                                int64_t v_cols, const int32_t* __restrict__ positions, const int32_t* __restrict__ slots,
                                int64_t slot_rows, int64_t cache_rows, float* __restrict__ kc, float* __restrict__ vc) {
    wait_for_inputs();
    const int64_t t = blockIdx.x;
    if (positions[t] < 0 || positions[t] >= slot_rows || slots[t] < 0) return;
    const int64_t pos = int64_t(slots[t]) * slot_rows + positions[t];
    if (pos >= cache_rows) return;
    for (int64_t i = threadIdx.x; i < k_cols; i += blockDim.x) kc[pos * k_cols + i] = k[t * k_cols + i];
    for (int64_t i = threadIdx.x; i < v_cols; i += blockDim.x) vc[pos * v_cols + i] = v[t * v_cols + i];
}

__global__ void gather_rows_kernel(const float* __restrict__ src, int64_t src_rows, const int32_t* __restrict__ rows,
                                   int64_t cols, float* __restrict__ dst) {
    wait_for_inputs();
    const int64_t i = blockIdx.x, r = rows[i];
    if (r < 0 || r >= src_rows) return;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dst[i * cols + c] = src[r * cols + c];
}

}  // namespace

int attention_splits(int64_t n_tok, int n_head, int64_t slot_rows) {
    const int64_t blocks = n_tok * n_head;
    if (blocks >= kTargetBlocks) return 1;
    const int64_t by_blocks = (kTargetBlocks + blocks - 1) / blocks;
    const int64_t by_keys = std::max<int64_t>(1, slot_rows / kMinKeysPerSplit);
    return int(std::max<int64_t>(1, std::min(by_blocks, by_keys)));
}

void attention(const float* q, int64_t n_tok, const float* k_cache, int64_t ld_k, const float* v_cache,
               int64_t ld_v, const int32_t* positions, const int32_t* slots, int64_t slot_rows,
               const AttentionParams& p, int n_split, float* part_o, float* part_ml, float* out, cudaStream_t stream) {
    if (n_tok <= 0) return;
    if (p.n_head <= 0 || p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0)
        throw Error("CUDA attention needs n_head to be a positive multiple of n_head_kv.");
    if (n_tok * p.n_head > INT32_MAX || n_split < 1 || n_split > 65535)
        throw Error("CUDA attention: too many query rows or key splits.");
    AttnArgs a{p.n_head, p.n_head_kv, p.head_dim_k, p.head_dim_v, p.scale, int64_t(p.n_head) * p.head_dim_k, ld_k,
               ld_v, int64_t(p.n_head) * p.head_dim_v, n_split};
    const int dmax = std::max(p.head_dim_k, p.head_dim_v);
    const dim3 grid(unsigned(n_tok * p.n_head), unsigned(n_split));
    const int threads = 32 * kAttnWarps;
#define DS4_ATTN(DPL) \
    launch(attention_kernel<DPL>, grid, threads, 0, stream, q, k_cache, v_cache, positions, slots, slot_rows, a, out, \
                                                        part_o, part_ml)
    if (dmax <= 32) DS4_ATTN(1);
    else if (dmax <= 64) DS4_ATTN(2);
    else if (dmax <= 128) DS4_ATTN(4);
    else if (dmax <= 256) DS4_ATTN(8);
    else if (dmax <= 512) DS4_ATTN(16);
    else throw Error("CUDA attention supports head dimensions up to 512, not " + std::to_string(dmax) + ".");
#undef DS4_ATTN
    check_launch("attention_kernel");
    if (n_split > 1) {
        launch(attention_merge_kernel, unsigned(n_tok * p.n_head), 128, 0, stream, part_o, part_ml, a, out);
        check_launch("attention_merge_kernel");
    }
}

void kv_store(const float* k, int64_t k_cols, const float* v, int64_t v_cols, const int32_t* positions,
              const int32_t* slots, int64_t slot_rows, int64_t n_tok, int64_t cache_rows, float* k_cache,
              float* v_cache, cudaStream_t stream) {
    if (n_tok <= 0) return;
    launch(kv_store_kernel, unsigned(n_tok), 256, 0, stream, k, k_cols, v, v_cols, positions, slots, slot_rows, cache_rows,
                                                         k_cache, v_cache);
    check_launch("kv_store_kernel");
}

void gather_rows(const float* src, int64_t src_rows, const int32_t* rows, int64_t n, int64_t cols, float* dst,
                 cudaStream_t stream) {
    if (n <= 0) return;
    launch(gather_rows_kernel, unsigned(n), 256, 0, stream, src, src_rows, rows, cols, dst);
    check_launch("gather_rows_kernel");
}

}  // namespace ds4::cuda

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
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cache_row.cuh"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/env_switch.h"

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

// One block per (query row, head): merges its n_split partial results.
// Each split's factor exp(m_s - max) is computed once, by one thread, into
// shared memory (n_split floats each for the factors and the splits' l):
// the loop over splits then issues only the partial outputs' loads, not a
// dependent read of the split's (m, l) and an expf per split and element
// (at one sequence a decode merge of 33 splits took 7 us a layer, H200 ncu,
// 2026-12-02). Same expressions in the same split order as that loop, so
// the same bits; nor does the block's thread count change a value. The
// partial results are read through L2 (__ldcg): attention_kernel's last
// split block merges what the other blocks of its launch wrote.
__device__ __forceinline__ void merge_splits(const float* __restrict__ part_o, const float* __restrict__ part_ml,
                                             const AttnArgs& a, int64_t row_head, float* merge_sh,
                                             float* __restrict__ out) {
    float* f = merge_sh;               // n_split factors
    float* ls = merge_sh + a.n_split;  // n_split sums l (0: an empty split)
    __shared__ float red[32];
    const int64_t t = row_head / a.n_head;
    const int h = int(row_head % a.n_head);
    const int64_t base = row_head * a.n_split;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = int(blockDim.x >> 5);
    float mx = -FLT_MAX;
    for (int s = threadIdx.x; s < a.n_split; s += blockDim.x) {
        const float m = __ldcg(part_ml + 2 * (base + s)), l = __ldcg(part_ml + 2 * (base + s) + 1);
        ls[s] = l;
        f[s] = m;
        if (l > 0.0f) mx = fmaxf(mx, m);
    }
    // The maximum does not depend on the order it is taken in.
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    if (lane == 0) red[warp] = mx;
    __syncthreads();
    mx = -FLT_MAX;
    for (int w = 0; w < nw; ++w) mx = fmaxf(mx, red[w]);
    for (int s = threadIdx.x; s < a.n_split; s += blockDim.x) f[s] = ls[s] > 0.0f ? expf(f[s] - mx) : 0.0f;
    __syncthreads();
    float total = 0.0f;
    for (int s = 0; s < a.n_split; ++s)
        if (ls[s] > 0.0f) total += ls[s] * f[s];
    float* o = out + t * a.ld_o + int64_t(h) * a.dv;
    for (int d = threadIdx.x; d < a.dv; d += blockDim.x) {
        float v = 0.0f;
#pragma unroll 8
        for (int s = 0; s < a.n_split; ++s)
            if (ls[s] > 0.0f) v += __ldcg(part_o + (base + s) * a.dv + d) * f[s];
        o[d] = v / total;
    }
}

__global__ void attention_merge_kernel(const float* __restrict__ part_o, const float* __restrict__ part_ml, AttnArgs a,
                                       float* __restrict__ out) {
    wait_for_inputs();
    extern __shared__ float merge_sh[];
    merge_splits(part_o, part_ml, a, blockIdx.x, merge_sh, out);
}

// DPL: head-dimension elements per lane (dk, dv <= 32 * DPL).
template <int DPL>
__global__ void attention_kernel(const float* __restrict__ q, const float* __restrict__ kc,
                                 const float* __restrict__ vc, const int32_t* __restrict__ positions,
                                 const int32_t* __restrict__ slots, int64_t slot_rows, AttnArgs a,
                                 float* __restrict__ out, float* __restrict__ part_o, float* __restrict__ part_ml,
                                 unsigned* __restrict__ merge_count) {
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
    if (!merge_count) return;
    // The last of the row's and head's splits to finish merges them (the
    // merge launch folded in: ~5 us of a ~70 us Qwen3 decode layer), then
    // leaves the count at zero for the next launch.
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(merge_count + blockIdx.x, 1u) == unsigned(a.n_split) - 1u;
    __syncthreads();
    if (!last) return;
    __threadfence();
    extern __shared__ float merge_sh[];
    merge_splits(part_o, part_ml, a, blockIdx.x, merge_sh, out);
    if (threadIdx.x == 0) merge_count[blockIdx.x] = 0u;
}

// Decode attention grouped by KV head: one block per (query row, KV head,
// split) serves the G = n_head / n_head_kv query heads that read that KV
// head, so each key and value row is read once for all G instead of once
// per query head (an 8-sequence Qwen3-30B step spent 28 us a layer in
// attention_kernel, its K/V re-read 8 times from L2 and a 5-shuffle
// reduction per key and head; H200 ncu, 2026-12-02).
//
// Each warp takes tiles of 32 keys. A tile's K and V rows are copied into
// the warp's part of shared memory with cp.async, every row of both in
// flight at once (the first version read them with register loads, a few
// keys per memory round trip: 24 us a layer at one sequence, H200 ncu,
// 2026-12-04). Then lane j takes key j: its whole dot with each of the G
// query rows (also in shared memory) in one lane, no shuffles; the tile's
// softmax maxima are warp-wide per head; then value row j, weighted by its
// key's factor (one shuffle per key and head), is added into each lane's
// dims l + 32 c. A lane's l sums the factors of its own keys (all rescaled
// by the same warp-uniform corrections), summed across the warp at the end.
// Partial results use attention_kernel's layout, so the merge is shared.
template <int G, int DPL>
struct GqaShape {
    static constexpr int D = 32 * DPL;       // dk, dv <= D
    static constexpr int KS = D / 4 + 1;     // a K row in float4s, padded: lane j's reads of row j miss each other's banks
    static constexpr int VS = D / 4;
    static constexpr int kQ = G * (D / 4);   // float4s of the query rows
    static constexpr int kWarpTile = 32 * (KS + VS);
    static constexpr size_t bytes() { return sizeof(float4) * size_t(kQ + kAttnWarps * kWarpTile); }
};

template <int G, int DPL>
__global__ void __launch_bounds__(32 * kAttnWarps)
    attention_gqa_kernel(const float* __restrict__ q, const float* __restrict__ kc, const float* __restrict__ vc,
                         const int32_t* __restrict__ positions, const int32_t* __restrict__ slots, int64_t slot_rows,
                         AttnArgs a, float* __restrict__ out, float* __restrict__ part_o, float* __restrict__ part_ml) {
    using S = GqaShape<G, DPL>;
    extern __shared__ float4 gqa_sh[];
    float4* qs = gqa_sh;  // [G][D / 4]
    __shared__ float sm[kAttnWarps][G], sl[kAttnWarps][G];
    wait_for_inputs();
    const int64_t t = blockIdx.x / a.n_head_kv;
    const int hk = int(blockIdx.x % a.n_head_kv), split = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float4* kt = gqa_sh + S::kQ + warp * S::kWarpTile;  // [32][KS]
    float4* vt = kt + 32 * S::KS;                        // [32][VS]
    kc += int64_t(slots[t]) * slot_rows * a.ld_k + int64_t(hk) * a.dk;
    vc += int64_t(slots[t]) * slot_rows * a.ld_v + int64_t(hk) * a.dv;
    const int64_t n_kv = int64_t(positions[t]) + 1;
    const int64_t per = (n_kv + a.n_split - 1) / a.n_split;
    const int64_t j0 = int64_t(split) * per, j1 = min(n_kv, j0 + per);
    const int dk4 = a.dk / 4, dv4 = a.dv / 4;
    // The G query rows of this KV head (heads hk * G .. hk * G + G - 1).
    const float* qv = q + t * a.ld_q + int64_t(hk) * G * a.dk;
    for (int i = threadIdx.x; i < G * dk4; i += blockDim.x)
        qs[(i / dk4) * (S::D / 4) + i % dk4] = reinterpret_cast<const float4*>(qv + int64_t(i / dk4) * a.dk)[i % dk4];
    __syncthreads();

    float m[G], l[G], acc[G][DPL];
#pragma unroll
    for (int g = 0; g < G; ++g) {
        m[g] = -FLT_MAX;
        l[g] = 0.0f;
#pragma unroll
        for (int c = 0; c < DPL; ++c) acc[g][c] = 0.0f;
    }
    for (int64_t jt = j0 + int64_t(warp) * 32; jt < j1; jt += int64_t(kAttnWarps) * 32) {
        const int n_here = int(j1 - jt < 32 ? j1 - jt : 32);
        // The tile: row r of K and of V (lane c copies 16 bytes c of each);
        // rows past the range repeat row 0 and are weighted 0.
        for (int r = 0; r < 32; ++r) {
            const int64_t jr = jt + (r < n_here ? r : 0);
            if (lane < dk4) cp_async16(kt + r * S::KS + lane, kc + jr * a.ld_k + 4 * lane);
            if (lane < dv4) cp_async16(vt + r * S::VS + lane, vc + jr * a.ld_v + 4 * lane);
        }
        cp_async_wait_all();
        __syncwarp();
        const bool valid = lane < n_here;
        float s[G];
#pragma unroll
        for (int g = 0; g < G; ++g) s[g] = 0.0f;
#pragma unroll 4
        for (int c = 0; c < dk4; ++c) {
            const float4 kv = kt[lane * S::KS + c];
#pragma unroll
            for (int g = 0; g < G; ++g) {
                const float4 qq = qs[g * (S::D / 4) + c];
                s[g] += kv.x * qq.x + kv.y * qq.y + kv.z * qq.z + kv.w * qq.w;
            }
        }
        float p[G];
#pragma unroll
        for (int g = 0; g < G; ++g) {
            const float sc = valid ? s[g] * a.scale : -FLT_MAX;
            float tm = sc;
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, off));
            const float m_new = fmaxf(m[g], tm);
            const float corr = expf(m[g] - m_new);
            p[g] = valid ? expf(sc - m_new) : 0.0f;
            l[g] = l[g] * corr + p[g];
#pragma unroll
            for (int c = 0; c < DPL; ++c) acc[g][c] *= corr;
            m[g] = m_new;
        }
        const float* vf = reinterpret_cast<const float*>(vt);
        for (int jj = 0; jj < n_here; ++jj) {
            float vv[DPL];
#pragma unroll
            for (int c = 0; c < DPL; ++c) vv[c] = vf[jj * (4 * S::VS) + lane + 32 * c];  // past dv: never stored
#pragma unroll
            for (int g = 0; g < G; ++g) {
                const float pj = __shfl_sync(0xffffffffu, p[g], jj);
#pragma unroll
                for (int c = 0; c < DPL; ++c) acc[g][c] += pj * vv[c];
            }
        }
        __syncwarp();  // the tile is rewritten by the warp's next one
    }
    // Merge the warps per head, as attention_kernel does (a warp with no keys
    // has l = 0 and contributes nothing). The partial sums go where the
    // tiles were.
    __syncthreads();
    float* sacc = reinterpret_cast<float*>(gqa_sh + S::kQ);  // [kAttnWarps][G][D]
#pragma unroll
    for (int g = 0; g < G; ++g) {
        float lw = l[g];
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) lw += __shfl_xor_sync(0xffffffffu, lw, off);
        if (lane == 0) {
            sm[warp][g] = m[g];
            sl[warp][g] = lw;
        }
#pragma unroll
        for (int c = 0; c < DPL; ++c) sacc[(warp * G + g) * S::D + lane + 32 * c] = acc[g][c];
    }
    __syncthreads();
    for (int g = 0; g < G; ++g) {
        float mx = -FLT_MAX;
        for (int w = 0; w < kAttnWarps; ++w) mx = fmaxf(mx, sm[w][g]);
        float total = 0.0f;
        for (int w = 0; w < kAttnWarps; ++w) total += sl[w][g] * expf(sm[w][g] - mx);
        const int h = hk * G + g;
        float* o = a.n_split == 1 ? out + t * a.ld_o + int64_t(h) * a.dv
                                  : part_o + ((t * a.n_head + h) * a.n_split + split) * a.dv;
        for (int d = threadIdx.x; d < a.dv; d += blockDim.x) {
            float v = 0.0f;
            for (int w = 0; w < kAttnWarps; ++w) v += sacc[(w * G + g) * S::D + d] * expf(sm[w][g] - mx);
            o[d] = a.n_split == 1 ? v / total : v;
        }
        if (a.n_split > 1 && threadIdx.x == 0) {
            const int64_t slot = (t * a.n_head + h) * a.n_split + split;
            part_ml[2 * slot] = mx;
            part_ml[2 * slot + 1] = total;
        }
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
    const int64_t pos = cache_row(positions, slots, t, slot_rows, cache_rows);
    if (pos < 0) return;
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

// Whether n_tok query rows take attention_gqa_kernel: batched decode (2 or
// more rows in the split-K regime), a group size it is built for, head
// dimensions of whole float4s up to 128 (tiles of 32 keys of K and V in
// shared memory: up to 141 KiB a block). Measured on the H200 (Qwen3-30B
// q4_k_m, 2026-12-04), against attention_kernel: 8 sequences 805 vs 782 t/s,
// 32: 1032 vs 1007; one sequence 243 vs 253 at 512 tokens (20 blocks of one
// a SM: too few), 228 vs 213 at 4096, and slower than before at 16k (four
// waves of one block a SM, no copy overlapped with compute). Shapes only, so
// a recorded step keeps its kernel and splits. DS4_CUDA_ATTN_GQA=0 keeps
// every row on attention_kernel (A/B).
bool gqa_decode_shape(int64_t n_tok, const AttentionParams& p) {
    static const bool on = env_switch("DS4_CUDA_ATTN_GQA", true);
    if (!on || p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0) return false;
    const int g = p.n_head / p.n_head_kv;
    return n_tok >= 2 && n_tok * p.n_head < kTargetBlocks && (g == 2 || g == 4 || g == 8 || g == 16) && p.head_dim_k > 0 &&
           p.head_dim_v > 0 && p.head_dim_k % 4 == 0 && p.head_dim_v % 4 == 0 && p.head_dim_k <= 128 &&
           p.head_dim_v <= 128;
}

// Launches attention_gqa_kernel<G, DPL> with its tiles' shared memory (over
// the 48 KiB a block gets without asking; raised once per kernel).
template <int G, int DPL>
void launch_gqa_d(dim3 grid, cudaStream_t stream, const float* q, const float* kc, const float* vc,
                  const int32_t* positions, const int32_t* slots, int64_t slot_rows, const AttnArgs& a, float* out,
                  float* part_o, float* part_ml) {
    constexpr size_t bytes = GqaShape<G, DPL>::bytes();
    static const bool raised = [] {
        check(cudaFuncSetAttribute(attention_gqa_kernel<G, DPL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(bytes)),
              "raising attention_gqa_kernel's shared memory");
        return true;
    }();
    (void)raised;
    launch(attention_gqa_kernel<G, DPL>, grid, 32 * kAttnWarps, bytes, stream, q, kc, vc, positions, slots, slot_rows, a,
           out, part_o, part_ml);
}
template <int G>
void launch_gqa(int dmax, dim3 grid, cudaStream_t stream, const float* q, const float* kc, const float* vc,
                const int32_t* positions, const int32_t* slots, int64_t slot_rows, const AttnArgs& a, float* out,
                float* part_o, float* part_ml) {
    if (dmax <= 64) launch_gqa_d<G, 2>(grid, stream, q, kc, vc, positions, slots, slot_rows, a, out, part_o, part_ml);
    else launch_gqa_d<G, 4>(grid, stream, q, kc, vc, positions, slots, slot_rows, a, out, part_o, part_ml);
}

}  // namespace

int attention_splits(int64_t n_tok, const AttentionParams& p, int64_t slot_rows) {
    if (gqa_decode_shape(n_tok, p)) {
        // Blocks of (row, KV head); a block's warps take 32 keys each at a time.
        const int64_t blocks = n_tok * p.n_head_kv;
        const int64_t by_blocks = (kTargetBlocks + blocks - 1) / blocks;
        const int64_t by_keys = std::max<int64_t>(1, slot_rows / (32 * kAttnWarps));
        return int(std::max<int64_t>(1, std::min(by_blocks, by_keys)));
    }
    const int64_t blocks = n_tok * p.n_head;
    if (blocks >= kTargetBlocks) return 1;
    const int64_t by_blocks = (kTargetBlocks + blocks - 1) / blocks;
    const int64_t by_keys = std::max<int64_t>(1, slot_rows / kMinKeysPerSplit);
    return int(std::max<int64_t>(1, std::min(by_blocks, by_keys)));
}

void attention(const float* q, int64_t n_tok, const float* k_cache, int64_t ld_k, const float* v_cache,
               int64_t ld_v, const int32_t* positions, const int32_t* slots, int64_t slot_rows,
               const AttentionParams& p, int n_split, float* part_o, float* part_ml, float* out, cudaStream_t stream,
               unsigned* merge_count, int64_t merge_counts) {
    if (n_tok <= 0) return;
    if (p.n_head <= 0 || p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0)
        throw Error("CUDA attention needs n_head to be a positive multiple of n_head_kv.");
    // The merge keeps two floats a split in shared memory (attention_splits gives at most kTargetBlocks).
    if (n_tok * p.n_head > INT32_MAX || n_split < 1 || n_split > 4096)
        throw Error("CUDA attention: too many query rows or key splits.");
    AttnArgs a{p.n_head, p.n_head_kv, p.head_dim_k, p.head_dim_v, p.scale, int64_t(p.n_head) * p.head_dim_k, ld_k,
               ld_v, int64_t(p.n_head) * p.head_dim_v, n_split};
    const int dmax = std::max(p.head_dim_k, p.head_dim_v);
    const int threads = 32 * kAttnWarps;
    // The grouped kernel copies q, K and V rows in 16-byte pieces.
    const bool rows16 = reinterpret_cast<uintptr_t>(q) % 16 == 0 && reinterpret_cast<uintptr_t>(k_cache) % 16 == 0 &&
                        reinterpret_cast<uintptr_t>(v_cache) % 16 == 0 && ld_k % 4 == 0 && ld_v % 4 == 0;
    if (gqa_decode_shape(n_tok, p) && rows16) {
        const dim3 grid(unsigned(n_tok * p.n_head_kv), unsigned(n_split));
        const int g = p.n_head / p.n_head_kv;
        if (g == 2) launch_gqa<2>(dmax, grid, stream, q, k_cache, v_cache, positions, slots, slot_rows, a, out, part_o, part_ml);
        else if (g == 4) launch_gqa<4>(dmax, grid, stream, q, k_cache, v_cache, positions, slots, slot_rows, a, out, part_o, part_ml);
        else if (g == 8) launch_gqa<8>(dmax, grid, stream, q, k_cache, v_cache, positions, slots, slot_rows, a, out, part_o, part_ml);
        else launch_gqa<16>(dmax, grid, stream, q, k_cache, v_cache, positions, slots, slot_rows, a, out, part_o, part_ml);
        check_launch("attention_gqa_kernel");
    } else {
        const dim3 grid(unsigned(n_tok * p.n_head), unsigned(n_split));
        // The splits merged by their last block where a count per (row, head) is given.
        unsigned* count = n_split > 1 && merge_count && n_tok * p.n_head <= merge_counts ? merge_count : nullptr;
        const size_t merge_bytes = count ? 2 * sizeof(float) * size_t(n_split) : 0;
#define DS4_ATTN(DPL)                                                                                                 \
    launch(attention_kernel<DPL>, grid, threads, merge_bytes, stream, q, k_cache, v_cache, positions, slots, slot_rows, \
           a, out, part_o, part_ml, count)
        if (dmax <= 32) DS4_ATTN(1);
        else if (dmax <= 64) DS4_ATTN(2);
        else if (dmax <= 128) DS4_ATTN(4);
        else if (dmax <= 256) DS4_ATTN(8);
        else if (dmax <= 512) DS4_ATTN(16);
        else throw Error("CUDA attention supports head dimensions up to 512, not " + std::to_string(dmax) + ".");
#undef DS4_ATTN
        check_launch("attention_kernel");
        if (count) return;
    }
    attention_merge(part_o, part_ml, n_tok, p.n_head, n_split, p.head_dim_v, a.ld_o, out, stream);
}

void attention_merge(const float* part_o, const float* part_ml, int64_t n_tok, int n_head, int n_split, int dv,
                     int64_t ld_o, float* out, cudaStream_t stream) {
    if (n_tok <= 0 || n_split <= 1) return;
    if (n_tok * n_head > INT32_MAX || n_split > 4096) throw Error("CUDA attention merge: too many rows or splits.");
    AttnArgs a{};
    a.n_head = n_head;
    a.dv = dv;
    a.ld_o = ld_o;
    a.n_split = n_split;
    // A thread per output value up to 1024: at 128 threads GLM-5's 512-value latent rows took each thread 4
    // passes over the splits (12 us a decode layer, ncu, H200, 2026-12-04). Same sums per value.
    const int threads = int(std::clamp<int64_t>((dv + 31) / 32 * 32, 128, 1024));
    launch(attention_merge_kernel, unsigned(n_tok * n_head), threads, 2 * sizeof(float) * size_t(n_split), stream, part_o,
           part_ml, a, out);
    check_launch("attention_merge_kernel");
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

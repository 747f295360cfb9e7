// Causal GQA attention for prefill on the tensor cores (TF32 mma.sync,
// f32 sums): the many-query-row case of attention.cu's kernels.
//
// Why: attention_kernel gives every (query row, head) one block that reads
// its sequence's whole K and V from L2 and spends a shuffle chain per key.
// A prefill row at depth n reads n keys for each of the n_head heads, so a
// server step of 2,000 prompt rows at depth ~2k moved ~1.3 TB of L2 traffic
// per Qwen3-30B layer. Here a warp serves 16 query rows of one KV head
// (16 / G tokens times the G query heads that read that KV head) with one
// copy of each key tile, and the dot products are mma's: the same keys
// feed 16 rows at once.
//
// Layout of a warp's work: rows r = 0..15 are (token r / G, head hk * G +
// r % G). The queries stay in registers as A fragments (pre-scaled). Key
// tiles of 16 rows of K and V are copied into the warp's shared memory with
// cp.async; S = Q K^T (two 16x8 tiles), an online softmax per row (each row
// lives in the four lanes of a quad), P goes through shared memory into A
// fragments, O += P V (D / 8 tiles of 16x8). Tokens of a batch belong to
// different sequences (a mixed batch): the warp makes one pass per distinct
// slot among its tokens, rows of other slots masked in that pass, so a
// warp never mixes two sequences' keys.
//
// Precision: operands rounded to TF32 (10-bit mantissa, float range: no
// overflow of large K or V values as in f16), sums in f32. The prefill
// products already round activations to f16 in this mode (f16_prefill);
// --exact keeps attention.cu's FP32 kernels.
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/env_switch.h"

namespace ds4::cuda {
namespace {

constexpr int kTcWarps = 4;
constexpr int kKeyTile = 16;

__device__ __forceinline__ uint32_t to_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

// c += a (16x8, row) * b (8x8, col), TF32 in, f32 sums.
__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

struct TcArgs {
    float scale;
    int64_t ld_q, ld_k, ld_v, ld_o;
};

// Shared memory of one warp: K and V tiles (rows padded so that the
// fragment reads of the 8 row groups and 4 column groups of a warp fall in
// 32 different banks: K rows 4 floats apart mod 32, V rows 8), and P.
template <int D>
struct TcShape {
    static constexpr int KS = D + 4;
    static constexpr int VS = D + 8;
    static constexpr int PS = kKeyTile + 4;
    static constexpr int kWarpFloats = kKeyTile * KS + kKeyTile * VS + 16 * PS;
    static constexpr size_t bytes() { return sizeof(float) * size_t(kTcWarps) * kWarpFloats; }
};

template <int G, int D>
__global__ void __launch_bounds__(32 * kTcWarps)
    attention_tc_kernel(const float* __restrict__ q, const float* __restrict__ kc, const float* __restrict__ vc,
                        const int32_t* __restrict__ positions, const int32_t* __restrict__ slots, int64_t slot_rows,
                        int64_t n_tok, TcArgs a, float* __restrict__ out) {
    constexpr int TW = 16 / G;  // tokens a warp
    constexpr int KSTEPS = D / 8;
    using S = TcShape<D>;
    extern __shared__ float tc_sh[];
    wait_for_inputs();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int gid = lane >> 2, tig = lane & 3;
    const int hk = blockIdx.y;
    const int64_t tok0 = (int64_t(blockIdx.x) * kTcWarps + warp) * TW;
    if (tok0 >= n_tok) return;
    float* ks = tc_sh + warp * S::kWarpFloats;  // [kKeyTile][KS]
    float* vs = ks + kKeyTile * S::KS;          // [kKeyTile][VS]
    float* ps = vs + kKeyTile * S::VS;          // [16][PS]

    // This thread's two rows (gid, gid + 8): token and head.
    int64_t row_tok[2];
    int row_pos[2], row_slot[2];
    bool row_ok[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = gid + 8 * h;
        row_tok[h] = tok0 + r / G;
        row_ok[h] = row_tok[h] < n_tok;
        row_pos[h] = row_ok[h] ? positions[row_tok[h]] : -1;
        row_slot[h] = row_ok[h] ? slots[row_tok[h]] : -1;
    }
    // Q as A fragments, scaled: a[ks] = {Q[gid][8ks+tig], Q[gid+8][8ks+tig], Q[gid][8ks+tig+4], Q[gid+8][8ks+tig+4]}.
    uint32_t qa[KSTEPS][4];
    {
        const float* q0 = q + (row_ok[0] ? row_tok[0] : 0) * a.ld_q + int64_t(hk * G + gid % G) * D;
        const float* q1 = q + (row_ok[1] ? row_tok[1] : 0) * a.ld_q + int64_t(hk * G + (gid + 8) % G) * D;
#pragma unroll
        for (int k = 0; k < KSTEPS; ++k) {
            qa[k][0] = to_tf32(row_ok[0] ? q0[8 * k + tig] * a.scale : 0.0f);
            qa[k][1] = to_tf32(row_ok[1] ? q1[8 * k + tig] * a.scale : 0.0f);
            qa[k][2] = to_tf32(row_ok[0] ? q0[8 * k + tig + 4] * a.scale : 0.0f);
            qa[k][3] = to_tf32(row_ok[1] ? q1[8 * k + tig + 4] * a.scale : 0.0f);
        }
    }
    // Output accumulators: o[n] = {O[gid][8n+2tig], O[gid][8n+2tig+1], O[gid+8][8n+2tig], O[gid+8][8n+2tig+1]}.
    float o[KSTEPS][4];
#pragma unroll
    for (int n = 0; n < KSTEPS; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // l: this lane's share of the row's sum

    // One pass per distinct slot among the warp's tokens (uniform over the warp).
    unsigned done = 0;
    for (;;) {
        int pass_slot = -1, n_keys = 0;
        for (int w = 0; w < TW; ++w) {
            const int64_t t = tok0 + w;
            if (t >= n_tok || (done >> w & 1u)) continue;
            const int s = slots[t];
            if (pass_slot < 0) pass_slot = s;
            if (s == pass_slot) {
                done |= 1u << w;
                n_keys = max(n_keys, positions[t] + 1);
            }
        }
        if (pass_slot < 0) break;
        const bool act0 = row_ok[0] && row_slot[0] == pass_slot, act1 = row_ok[1] && row_slot[1] == pass_slot;
        const float* kbase = kc + int64_t(pass_slot) * slot_rows * a.ld_k + int64_t(hk) * D;
        const float* vbase = vc + int64_t(pass_slot) * slot_rows * a.ld_v + int64_t(hk) * D;
        for (int j0 = 0; j0 < n_keys; j0 += kKeyTile) {
            // The tile: 16 rows of K and V, D / 4 16-byte pieces a row; rows past the keys repeat row j0 (masked).
            constexpr int kPieces = kKeyTile * (D / 4);
#pragma unroll
            for (int i = lane; i < kPieces; i += 32) {
                const int r = i / (D / 4), c = i % (D / 4);
                const int64_t j = j0 + r < n_keys ? j0 + r : j0;
                cp_async16(ks + r * S::KS + 4 * c, kbase + j * a.ld_k + 4 * c);
                cp_async16(vs + r * S::VS + 4 * c, vbase + j * a.ld_v + 4 * c);
            }
            cp_async_wait_all();
            __syncwarp();
            // S = Q K^T: s[nt] covers keys j0 + 8nt + {2tig, 2tig+1} of rows gid (0, 1) and gid + 8 (2, 3).
            float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                const float* krow = ks + (8 * nt + gid) * S::KS;
#pragma unroll
                for (int k = 0; k < KSTEPS; ++k)
                    mma_tf32(s[nt], qa[k], to_tf32(krow[8 * k + tig]), to_tf32(krow[8 * k + tig + 4]));
            }
            // Mask (other slots' rows, keys past the row's position) and the online softmax per row.
            float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int h = e >> 1;
                    const int j = j0 + 8 * nt + 2 * tig + (e & 1);
                    const bool ok = (h ? act1 : act0) && j <= row_pos[h];
                    s[nt][e] = ok ? s[nt][e] : -INFINITY;
                    tmax[h] = fmaxf(tmax[h], s[nt][e]);
                }
            float corr[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                tmax[h] = fmaxf(tmax[h], __shfl_xor_sync(0xffffffffu, tmax[h], 1));
                tmax[h] = fmaxf(tmax[h], __shfl_xor_sync(0xffffffffu, tmax[h], 2));
                const float m_new = fmaxf(m[h], tmax[h]);
                // A row with no key yet (m_new = -inf) keeps its zeros.
                corr[h] = m_new == -INFINITY ? 1.0f : expf(m[h] - m_new);
                m[h] = m_new;
                l[h] *= corr[h];
            }
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int h = e >> 1;
                    const float p = s[nt][e] == -INFINITY ? 0.0f : expf(s[nt][e] - m[h]);
                    l[h] += p;
                    ps[(gid + 8 * h) * S::PS + 8 * nt + 2 * tig + (e & 1)] = p;
                }
#pragma unroll
            for (int n = 0; n < KSTEPS; ++n) {
                o[n][0] *= corr[0];
                o[n][1] *= corr[0];
                o[n][2] *= corr[1];
                o[n][3] *= corr[1];
            }
            __syncwarp();
            // O += P V over the tile's two 8-key steps.
#pragma unroll
            for (int kk = 0; kk < 2; ++kk) {
                const uint32_t pa[4] = {to_tf32(ps[gid * S::PS + 8 * kk + tig]), to_tf32(ps[(gid + 8) * S::PS + 8 * kk + tig]),
                                        to_tf32(ps[gid * S::PS + 8 * kk + tig + 4]),
                                        to_tf32(ps[(gid + 8) * S::PS + 8 * kk + tig + 4])};
                const float* v0 = vs + (8 * kk + tig) * S::VS;
                const float* v1 = vs + (8 * kk + tig + 4) * S::VS;
#pragma unroll
                for (int n = 0; n < KSTEPS; ++n) mma_tf32(o[n], pa, to_tf32(v0[8 * n + gid]), to_tf32(v1[8 * n + gid]));
            }
            __syncwarp();  // the tile and P are rewritten next
        }
    }
    // The row sums over the quad, then O / l.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        if (!row_ok[h]) continue;
        const int r = gid + 8 * h;
        float* orow = out + row_tok[h] * a.ld_o + int64_t(hk * G + r % G) * D;
        const float inv = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;
#pragma unroll
        for (int n = 0; n < KSTEPS; ++n) {
            orow[8 * n + 2 * tig] = o[n][2 * h] * inv;
            orow[8 * n + 2 * tig + 1] = o[n][2 * h + 1] * inv;
        }
    }
}

template <int G, int D>
void launch_tc(int64_t n_tok, int n_head_kv, cudaStream_t stream, const float* q, const float* kc, const float* vc,
               const int32_t* positions, const int32_t* slots, int64_t slot_rows, const TcArgs& a, float* out) {
    constexpr size_t bytes = TcShape<D>::bytes();
    static const bool raised = [] {
        check(cudaFuncSetAttribute(attention_tc_kernel<G, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
              "raising attention_tc_kernel's shared memory");
        return true;
    }();
    (void)raised;
    constexpr int64_t per_block = int64_t(kTcWarps) * (16 / G);
    const dim3 grid(unsigned((n_tok + per_block - 1) / per_block), unsigned(n_head_kv));
    launch(attention_tc_kernel<G, D>, grid, 32 * kTcWarps, bytes, stream, q, kc, vc, positions, slots, slot_rows, n_tok,
           a, out);
}

template <int G>
void launch_tc_g(int d, int64_t n_tok, int n_head_kv, cudaStream_t stream, const float* q, const float* kc,
                 const float* vc, const int32_t* positions, const int32_t* slots, int64_t slot_rows, const TcArgs& a,
                 float* out) {
    if (d == 64) launch_tc<G, 64>(n_tok, n_head_kv, stream, q, kc, vc, positions, slots, slot_rows, a, out);
    else launch_tc<G, 128>(n_tok, n_head_kv, stream, q, kc, vc, positions, slots, slot_rows, a, out);
}

}  // namespace

bool attention_tc_shape(const AttentionParams& p, const float* k_cache, int64_t ld_k, const float* v_cache, int64_t ld_v) {
    // DS4_CUDA_ATTN_TC=0 keeps prefill rows on attention.cu's FP32 kernels (A/B).
    static const bool on = env_switch("DS4_CUDA_ATTN_TC", true);
    if (!on || p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0) return false;
    const int g = p.n_head / p.n_head_kv;
    // Key rows are copied in 16-byte pieces.
    const bool rows16 = reinterpret_cast<uintptr_t>(k_cache) % 16 == 0 && reinterpret_cast<uintptr_t>(v_cache) % 16 == 0 &&
                        ld_k % 4 == 0 && ld_v % 4 == 0;
    return rows16 && (g == 1 || g == 2 || g == 4 || g == 8 || g == 16) && p.head_dim_k == p.head_dim_v &&
           (p.head_dim_k == 64 || p.head_dim_k == 128);
}

void attention_tc(const float* q, int64_t n_tok, const float* k_cache, int64_t ld_k, const float* v_cache, int64_t ld_v,
                  const int32_t* positions, const int32_t* slots, int64_t slot_rows, const AttentionParams& p, float* out,
                  cudaStream_t stream) {
    if (n_tok <= 0) return;
    if (!attention_tc_shape(p, k_cache, ld_k, v_cache, ld_v))
        throw Error("CUDA tensor-core attention: unsupported heads or head size, or caches not 16-byte aligned.");
    if (n_tok > int64_t(INT32_MAX)) throw Error("CUDA tensor-core attention: too many query rows.");
    const TcArgs a{p.scale, int64_t(p.n_head) * p.head_dim_k, ld_k, ld_v,
                   int64_t(p.n_head) * p.head_dim_v};
    const int g = p.n_head / p.n_head_kv, d = p.head_dim_k;
    if (g == 1) launch_tc_g<1>(d, n_tok, p.n_head_kv, stream, q, k_cache, v_cache, positions, slots, slot_rows, a, out);
    else if (g == 2) launch_tc_g<2>(d, n_tok, p.n_head_kv, stream, q, k_cache, v_cache, positions, slots, slot_rows, a, out);
    else if (g == 4) launch_tc_g<4>(d, n_tok, p.n_head_kv, stream, q, k_cache, v_cache, positions, slots, slot_rows, a, out);
    else if (g == 8) launch_tc_g<8>(d, n_tok, p.n_head_kv, stream, q, k_cache, v_cache, positions, slots, slot_rows, a, out);
    else launch_tc_g<16>(d, n_tok, p.n_head_kv, stream, q, k_cache, v_cache, positions, slots, slot_rows, a, out);
    check_launch("attention_tc_kernel");
}

}  // namespace ds4::cuda

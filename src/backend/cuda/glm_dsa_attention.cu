// Multi-head latent attention (absorbed form) over listed cache rows on the
// GPU: head h of row t scores cache row j as (q_lat . latent[j] + q_pe .
// pe[j]) * scale, and the softmax-weighted sum of latent[j] is its output.
// One block per (query row, head, key split), each warp an online softmax
// over a strided share of the split's rows, two rows at a time (lanes split
// the dimensions), then the warps merge; with several splits a second kernel
// (attention.cu's merge) combines their partial results. Decode has one query
// row: 64 blocks of one split walked 512 rows a warp 64 dependent steps long
// and took 95 us a layer (H200, GLM-5 q2, 2026-12-04). A row's result
// depends on its own inputs and on the split count, which depends on the
// batch's size only.
#include <algorithm>
#include <cfloat>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_ops_glm_dsa.h"
#include "common/error.h"

namespace ds4::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kPePerLane = kLatentMaxPe / 32;
// Splits until a block holds ~kMinRowsPerSplit rows (two per warp step), up
// to kTargetBlocks blocks (eight waves of the H200's 132 SMs).
constexpr int kTargetBlocks = 8 * 132;
constexpr int kMinRowsPerSplit = 4 * kWarps;

// DPL: latent elements per lane (d_lat <= 32 * DPL).
template <int DPL>
__global__ void latent_attention_kernel(LatentAttentionArgs a) {
    wait_for_inputs();
    const int64_t t = blockIdx.x / a.n_head;
    const int h = int(blockIdx.x % a.n_head);
    const int split = int(blockIdx.y);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int D = a.d_lat, P = a.d_pe;
    const int64_t n = a.rows.count[t];
    const int64_t per = (n + a.n_split - 1) / a.n_split;
    const int64_t j0 = int64_t(split) * per, j1 = min(n, j0 + per);
    const float* ql = a.q_lat + t * (int64_t(a.n_head) * D) + int64_t(h) * D;
    const float* qp = a.q_pe + t * (int64_t(a.n_head) * P) + int64_t(h) * P;
    float qr[DPL], acc[DPL], qe[kPePerLane];
#pragma unroll
    for (int c = 0; c < DPL; ++c) {
        const int d = lane + 32 * c;
        qr[c] = d < D ? ql[d] : 0.0f;
        acc[c] = 0.0f;
    }
#pragma unroll
    for (int c = 0; c < kPePerLane; ++c) {
        const int d = lane + 32 * c;
        qe[c] = d < P ? qp[d] : 0.0f;
    }
    auto row_of = [&](int64_t j) {
        return a.rows.rows ? int64_t(a.rows.rows[t * a.rows.cap + j]) : int64_t(a.rows.base[t]) + j;
    };
    // Row j's scaled score (the warp's sum), its latent part in kr.
    auto score = [&](int64_t j, float (&kr)[DPL]) {
        const int64_t r = row_of(j);
        const float* kl = a.latent + r * D;
        const float* kp = a.pe + r * P;
        float s = 0.0f;
#pragma unroll
        for (int c = 0; c < DPL; ++c) {
            const int d = lane + 32 * c;
            kr[c] = d < D ? kl[d] : 0.0f;
            s += qr[c] * kr[c];
        }
#pragma unroll
        for (int c = 0; c < kPePerLane; ++c) {
            const int d = lane + 32 * c;
            if (d < P) s += qe[c] * kp[d];
        }
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        return s * a.scale;
    };
    // -FLT_MAX, not -inf: a warp without rows keeps l = 0 and its merge
    // factor expf(-FLT_MAX - mx) is 0, never inf - inf = NaN.
    float m = -FLT_MAX, l = 0.0f;
    // Two rows a step: their loads and shuffle sums overlap.
    for (int64_t j = j0 + warp; j < j1; j += 2 * kWarps) {
        float k0[DPL], k1[DPL];
        const float s0 = score(j, k0);
        const bool two = j + kWarps < j1;
        const float s1 = two ? score(j + kWarps, k1) : -FLT_MAX;
        const float m_new = fmaxf(m, fmaxf(s0, s1));
        const float corr = expf(m - m_new), p0 = expf(s0 - m_new), p1 = two ? expf(s1 - m_new) : 0.0f;
        l = l * corr + p0 + p1;
#pragma unroll
        for (int c = 0; c < DPL; ++c) acc[c] = acc[c] * corr + p0 * k0[c] + (two ? p1 * k1[c] : 0.0f);  // values are the latent keys
        m = m_new;
    }
    __shared__ float sm[kWarps], sl[kWarps];
    __shared__ float sacc[kWarps][32 * DPL];
    if (lane == 0) {
        sm[warp] = m;
        sl[warp] = l;
    }
#pragma unroll
    for (int c = 0; c < DPL; ++c) sacc[warp][lane + 32 * c] = acc[c];
    __syncthreads();
    float mx = -FLT_MAX;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm[w]);
    float total = 0.0f;
    for (int w = 0; w < kWarps; ++w) total += sl[w] * expf(sm[w] - mx);
    // One split: the normalised output (an empty set gives 0, as on the CPU).
    // Several: the unnormalised partial; an empty set's first split stands in
    // for the whole as (max 0, sum 1, output 0), so the merge gives 0 too.
    const bool whole = a.n_split == 1;
    const int64_t slot = int64_t(blockIdx.x) * a.n_split + split;
    const bool empty = n == 0;
    float* o = whole ? a.out + t * (int64_t(a.n_head) * D) + int64_t(h) * D : a.part_o + slot * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float v = 0.0f;
        for (int w = 0; w < kWarps; ++w) v += sacc[w][d] * expf(sm[w] - mx);
        o[d] = empty ? 0.0f : whole ? v / total : v;
    }
    if (!whole && threadIdx.x == 0) {
        const bool stand_in = empty && split == 0;
        a.part_ml[2 * slot] = stand_in ? 0.0f : mx;
        a.part_ml[2 * slot + 1] = stand_in ? 1.0f : total;
    }
}

}  // namespace

void glm_attention_latent(const LatentAttentionArgs& a, cudaStream_t stream) {
    if (a.n_tok <= 0 || a.n_head <= 0) return;
    if (a.d_lat > kLatentMaxDim || a.d_pe > kLatentMaxPe)
        throw Error("CUDA latent attention supports latents of up to " + std::to_string(kLatentMaxDim) +
                    " values and RoPE parts of up to " + std::to_string(kLatentMaxPe) + ", not " +
                    std::to_string(a.d_lat) + " and " + std::to_string(a.d_pe) + ".");
    if (a.n_split < 1 || a.n_split > 4096 || (a.n_split > 1 && (!a.part_o || !a.part_ml)))
        throw Error("CUDA latent attention: " + std::to_string(a.n_split) + " key splits without their buffers.");
    const int64_t blocks = a.n_tok * a.n_head;  // grid x: up to 2^31 - 1
    const int threads = 32 * kWarps;
    const dim3 grid(unsigned(blocks), unsigned(a.n_split));
    // sacc is kWarps * 32 * DPL floats: 16 KiB at a latent of 512.
    if (a.d_lat <= 32) launch(latent_attention_kernel<1>, grid, threads, 0, stream, a);
    else if (a.d_lat <= 64) launch(latent_attention_kernel<2>, grid, threads, 0, stream, a);
    else if (a.d_lat <= 128) launch(latent_attention_kernel<4>, grid, threads, 0, stream, a);
    else if (a.d_lat <= 256) launch(latent_attention_kernel<8>, grid, threads, 0, stream, a);
    else launch(latent_attention_kernel<16>, grid, threads, 0, stream, a);
    check_launch("latent_attention_kernel");
    attention_merge(a.part_o, a.part_ml, a.n_tok, a.n_head, a.n_split, a.d_lat, int64_t(a.n_head) * a.d_lat, a.out,
                    stream);
}

int latent_attention_splits(int64_t n_tok, int n_head, int64_t max_rows) {
    const int64_t blocks = n_tok * n_head;
    if (blocks >= kTargetBlocks || max_rows <= kMinRowsPerSplit) return 1;
    const int64_t by_blocks = (kTargetBlocks + blocks - 1) / blocks;
    const int64_t by_rows = max_rows / kMinRowsPerSplit;
    return int(std::max<int64_t>(1, std::min(by_blocks, by_rows)));
}

}  // namespace ds4::cuda

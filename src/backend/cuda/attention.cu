// Causal grouped-query attention, a simple correct kernel: one block per
// (query row, head); each warp walks a strided share of the visible keys with
// an online softmax, then the warps merge their partial results.
#include <cfloat>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"

namespace ds4::cuda {
namespace {

constexpr int kAttnWarps = 4;

struct AttnArgs {
    int n_head, n_head_kv, dk, dv;
    float scale;
    int64_t pos0, ld_q, ld_k, ld_v, ld_o;
};

// DPL: head-dimension elements per lane (dk, dv <= 32 * DPL).
template <int DPL>
__global__ void attention_kernel(const float* q, const float* kc, const float* vc, AttnArgs a, float* out) {
    const int64_t t = blockIdx.x / a.n_head;
    const int h = int(blockIdx.x % a.n_head);
    const int hk = h / (a.n_head / a.n_head_kv);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t n_kv = a.pos0 + t + 1;

    const float* qv = q + t * a.ld_q + int64_t(h) * a.dk;
    float qr[DPL], acc[DPL];
#pragma unroll
    for (int c = 0; c < DPL; ++c) {
        const int d = lane + 32 * c;
        qr[c] = d < a.dk ? qv[d] : 0.0f;
        acc[c] = 0.0f;
    }
    float m = -FLT_MAX, l = 0.0f;
    for (int64_t j = warp; j < n_kv; j += kAttnWarps) {
        const float* kv = kc + j * a.ld_k + int64_t(hk) * a.dk;
        float s = 0.0f;
#pragma unroll
        for (int c = 0; c < DPL; ++c) {
            const int d = lane + 32 * c;
            if (d < a.dk) s += qr[c] * kv[d];
        }
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        s *= a.scale;
        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new), p = expf(s - m_new);
        l = l * corr + p;
        const float* vv = vc + j * a.ld_v + int64_t(hk) * a.dv;
#pragma unroll
        for (int c = 0; c < DPL; ++c) {
            const int d = lane + 32 * c;
            acc[c] = acc[c] * corr + (d < a.dv ? p * vv[d] : 0.0f);
        }
        m = m_new;
    }
    // Merge the warps: rescale each to the common maximum.
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
    for (int w = 0; w < kAttnWarps; ++w) total += sl[w] * expf(sm[w] - mx);  // a warp with no keys has l = 0
    float* o = out + t * a.ld_o + int64_t(h) * a.dv;
    for (int d = threadIdx.x; d < a.dv; d += blockDim.x) {
        float v = 0.0f;
        for (int w = 0; w < kAttnWarps; ++w) v += sacc[w][d] * expf(sm[w] - mx);
        o[d] = v / total;
    }
}

}  // namespace

void attention(const float* q, int64_t n_tok, const float* k_cache, int64_t ld_k, const float* v_cache,
               int64_t ld_v, int64_t pos0, const AttentionParams& p, float* out, cudaStream_t stream) {
    if (n_tok <= 0) return;
    if (p.n_head <= 0 || p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0)
        throw Error("CUDA attention needs n_head to be a positive multiple of n_head_kv.");
    AttnArgs a{p.n_head, p.n_head_kv, p.head_dim_k, p.head_dim_v, p.scale, pos0,
               int64_t(p.n_head) * p.head_dim_k, ld_k, ld_v, int64_t(p.n_head) * p.head_dim_v};
    const int dmax = std::max(p.head_dim_k, p.head_dim_v);
    const unsigned grid = unsigned(n_tok * p.n_head);
    const int threads = 32 * kAttnWarps;
    if (dmax <= 32) attention_kernel<1><<<grid, threads, 0, stream>>>(q, k_cache, v_cache, a, out);
    else if (dmax <= 64) attention_kernel<2><<<grid, threads, 0, stream>>>(q, k_cache, v_cache, a, out);
    else if (dmax <= 128) attention_kernel<4><<<grid, threads, 0, stream>>>(q, k_cache, v_cache, a, out);
    else if (dmax <= 256) attention_kernel<8><<<grid, threads, 0, stream>>>(q, k_cache, v_cache, a, out);
    else if (dmax <= 512) attention_kernel<16><<<grid, threads, 0, stream>>>(q, k_cache, v_cache, a, out);
    else throw Error("CUDA attention supports head dimensions up to 512, not " + std::to_string(dmax) + ".");
    check_launch("attention_kernel");
}

}  // namespace ds4::cuda

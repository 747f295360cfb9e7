// Multi-head latent attention (absorbed form) over listed cache rows on the
// GPU: head h of row t scores cache row j as (q_lat . latent[j] + q_pe .
// pe[j]) * scale, and the softmax-weighted sum of latent[j] is its output.
// A simple correct kernel, like dsv4_attention.cu: one block per (query
// row, head), each warp an online softmax over a strided share of the rows
// (lanes split the dimensions), then the warps merge. Every row's result
// depends on its own inputs only, so a row computes the same alone and in
// any batch.
#include <cfloat>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops_glm_dsa.h"
#include "common/error.h"

namespace ds4::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kPePerLane = kLatentMaxPe / 32;

// DPL: latent elements per lane (d_lat <= 32 * DPL).
template <int DPL>
__global__ void latent_attention_kernel(LatentAttentionArgs a) {
    const int64_t t = blockIdx.x / a.n_head;
    const int h = int(blockIdx.x % a.n_head);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int D = a.d_lat, P = a.d_pe;
    const int64_t n = a.rows.count[t];
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
    // -FLT_MAX, not -inf: a warp without rows keeps l = 0 and its merge
    // factor expf(-FLT_MAX - mx) is 0, never inf - inf = NaN.
    float m = -FLT_MAX, l = 0.0f;
    for (int64_t j = warp; j < n; j += kWarps) {
        const int64_t r = a.rows.rows ? int64_t(a.rows.rows[t * a.rows.cap + j]) : int64_t(a.rows.base[t]) + j;
        const float* kl = a.latent + r * D;
        const float* kp = a.pe + r * P;
        float kr[DPL];
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
        s *= a.scale;
        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new), p = expf(s - m_new);
        l = l * corr + p;
#pragma unroll
        for (int c = 0; c < DPL; ++c) acc[c] = acc[c] * corr + p * kr[c];  // values are the latent keys
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
    float* o = a.out + t * (int64_t(a.n_head) * D) + int64_t(h) * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float v = 0.0f;
        for (int w = 0; w < kWarps; ++w) v += sacc[w][d] * expf(sm[w] - mx);
        o[d] = n > 0 ? v / total : 0.0f;  // an empty set gives 0, as on the CPU
    }
}

}  // namespace

void glm_attention_latent(const LatentAttentionArgs& a, cudaStream_t stream) {
    if (a.n_tok <= 0 || a.n_head <= 0) return;
    if (a.d_lat > kLatentMaxDim || a.d_pe > kLatentMaxPe)
        throw Error("CUDA latent attention supports latents of up to " + std::to_string(kLatentMaxDim) +
                    " values and RoPE parts of up to " + std::to_string(kLatentMaxPe) + ", not " +
                    std::to_string(a.d_lat) + " and " + std::to_string(a.d_pe) + ".");
    const int64_t blocks = a.n_tok * a.n_head;  // grid x: up to 2^31 - 1
    const int threads = 32 * kWarps;
    // sacc is kWarps * 32 * DPL floats: 16 KiB at a latent of 512.
    if (a.d_lat <= 32) latent_attention_kernel<1><<<unsigned(blocks), threads, 0, stream>>>(a);
    else if (a.d_lat <= 64) latent_attention_kernel<2><<<unsigned(blocks), threads, 0, stream>>>(a);
    else if (a.d_lat <= 128) latent_attention_kernel<4><<<unsigned(blocks), threads, 0, stream>>>(a);
    else if (a.d_lat <= 256) latent_attention_kernel<8><<<unsigned(blocks), threads, 0, stream>>>(a);
    else latent_attention_kernel<16><<<unsigned(blocks), threads, 0, stream>>>(a);
    check_launch("latent_attention_kernel");
}

}  // namespace ds4::cuda

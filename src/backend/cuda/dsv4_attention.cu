// DeepSeek V4's attention: many query heads against one shared key = value
// head; each query sees the sliding window of n_swa positions ending at
// itself (earlier positions from its slot's window ring, those of its own
// run in this batch from k) and
// the compressed rows listed for it, and a per-head sink logit joins the
// softmax denominator. A simple correct kernel, like attention.cu: one block
// per (query row, head), each warp an online softmax over a strided share of
// the keys, then the warps merge.
#include <cfloat>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops_deepseek4.h"

namespace ds4::cuda {
namespace {

constexpr int kWarps = 4;

// DPL: head-dimension elements per lane (head_dim <= 32 * DPL).
template <int DPL>
__global__ void window_sink_kernel(WindowSinkArgs a) {
    wait_for_inputs();
    const int64_t t = blockIdx.x / a.n_head;
    const int h = int(blockIdx.x % a.n_head);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int D = a.head_dim;
    const int64_t pos = a.positions[t], first = a.run_first[t];
    const int64_t lo = pos - a.n_swa + 1 > 0 ? pos - a.n_swa + 1 : 0;  // first window position
    const int64_t n_win = pos - lo + 1;
    const int64_t n_comp = a.comp ? a.comp_rows.count[t] : 0;
    const float* ring = a.window + int64_t(a.slots[t]) * a.n_swa * a.ld_window;

    const float* qv = a.q + t * (int64_t(a.n_head) * D) + int64_t(h) * D;
    float qr[DPL], acc[DPL];
#pragma unroll
    for (int c = 0; c < DPL; ++c) {
        const int d = lane + 32 * c;
        qr[c] = d < D ? qv[d] : 0.0f;
        acc[c] = 0.0f;
    }
    // -FLT_MAX, not -inf: a warp without keys keeps l = 0 and its merge
    // factor expf(-FLT_MAX - mx) is 0, never inf - inf = NaN.
    float m = -FLT_MAX, l = 0.0f;
    for (int64_t i = warp; i < n_win + n_comp; i += kWarps) {
        const float* key;
        if (i < n_win) {
            const int64_t j = lo + i;
            key = j >= first ? a.k + (t - (pos - j)) * a.ld_k : ring + (j % a.n_swa) * a.ld_window;
        } else {
            const int64_t c = i - n_win;
            const RowSetsView& v = a.comp_rows;
            key = a.comp + (v.rows ? int64_t(v.rows[t * v.cap + c]) : int64_t(v.base[t]) + c) * a.ld_comp;
        }
        float kr[DPL];
        float s = 0.0f;
#pragma unroll
        for (int c = 0; c < DPL; ++c) {
            const int d = lane + 32 * c;
            kr[c] = d < D ? key[d] : 0.0f;
            s += qr[c] * kr[c];
        }
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        s *= a.scale;
        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new), p = expf(s - m_new);
        l = l * corr + p;
#pragma unroll
        for (int c = 0; c < DPL; ++c) acc[c] = acc[c] * corr + p * kr[c];  // values are the keys
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
    // The sink is one more logit with a zero value vector: it raises the
    // maximum and the denominator only. Every query sees at least its own
    // key, so mx is finite even for a sink of -inf.
    const float sink = a.sinks[h];
    float mx = sink;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm[w]);
    float total = expf(sink - mx);
    for (int w = 0; w < kWarps; ++w) total += sl[w] * expf(sm[w] - mx);
    float* o = a.out + t * (int64_t(a.n_head) * D) + int64_t(h) * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float v = 0.0f;
        for (int w = 0; w < kWarps; ++w) v += sacc[w][d] * expf(sm[w] - mx);
        o[d] = v / total;
    }
}

}  // namespace

void attention_window_sink(const WindowSinkArgs& a, cudaStream_t stream) {
    if (a.n_tok <= 0 || a.n_head <= 0) return;
    const int64_t blocks = a.n_tok * a.n_head;  // grid x: up to 2^31 - 1
    const int threads = 32 * kWarps;
    // sacc is kWarps * 32 * DPL floats: 8 KiB at head_dim 512.
    if (a.head_dim <= 32) launch(window_sink_kernel<1>, unsigned(blocks), threads, 0, stream, a);
    else if (a.head_dim <= 64) launch(window_sink_kernel<2>, unsigned(blocks), threads, 0, stream, a);
    else if (a.head_dim <= 128) launch(window_sink_kernel<4>, unsigned(blocks), threads, 0, stream, a);
    else if (a.head_dim <= 256) launch(window_sink_kernel<8>, unsigned(blocks), threads, 0, stream, a);
    else if (a.head_dim <= kWindowSinkMaxHeadDim) launch(window_sink_kernel<16>, unsigned(blocks), threads, 0, stream, a);
    else
        throw Error("CUDA window attention supports head dimensions up to " + std::to_string(kWindowSinkMaxHeadDim) +
                    ", not " + std::to_string(a.head_dim) + ".");
    check_launch("window_sink_kernel");
}

}  // namespace ds4::cuda

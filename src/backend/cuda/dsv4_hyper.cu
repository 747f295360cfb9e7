// Hyper-connections (DeepSeek V4's n_hc residual streams): the per-token
// mixes (sigmoid gates and the Sinkhorn-normalised stream mix), the collapse
// of the streams into one block input and the expansion back; and the
// clamped SwiGLU of its experts. Products and sums are rounded one by one in
// the CPU backend's order (no fused multiply-add), so the results differ from
// the CPU only where expf does.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops_deepseek4.h"

namespace ds4::cuda {
namespace {

constexpr int kThreads = 256;

#define DS4_FOR_EACH(i, n) \
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

unsigned grid_for(int64_t n) { return std::min<unsigned>(blocks_for(n, kThreads), 65535u * 8u); }

__device__ float sigmoid(float x) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x))); }
__device__ float mul_add(float a, float b, float c) { return __fadd_rn(__fmul_rn(a, b), c); }

// One thread per token: the mixes are (2 + hc) * hc values and Sinkhorn's
// sweeps are sequential, so a token is a few hundred flops; rows are many.
__global__ void hc_mixes_kernel(const float* mixes, int64_t rows, int64_t ld, const float* scale, const float* base,
                                int hc, float eps, int iters, float* pre, float* post, float* comb) {
    wait_for_inputs();
    const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= rows) return;
    const float* m = mixes + t * ld;
    for (int h = 0; h < hc; ++h) pre[t * hc + h] = __fadd_rn(sigmoid(mul_add(m[h], scale[0], base[h])), eps);
    if (post)
        for (int h = 0; h < hc; ++h)
            post[t * hc + h] = __fmul_rn(sigmoid(mul_add(m[hc + h], scale[1], base[hc + h])), 2.0f);
    if (!comb) return;
    float c[kMaxHc * kMaxHc];  // c[dst + hc * src]: ggml's [dst, src] layout
    for (int i = 0; i < hc * hc; ++i) c[i] = mul_add(m[2 * hc + i], scale[2], base[2 * hc + i]);
    for (int src = 0; src < hc; ++src) {  // softmax over dst
        float* r = c + src * hc;
        float mx = r[0];
        for (int d = 1; d < hc; ++d) mx = fmaxf(mx, r[d]);
        double sum = 0.0;
        for (int d = 0; d < hc; ++d) {
            r[d] = expf(__fsub_rn(r[d], mx));
            sum += r[d];
        }
        const float inv = float(1.0 / sum);
        for (int d = 0; d < hc; ++d) r[d] = __fadd_rn(__fmul_rn(r[d], inv), eps);
    }
    auto norm_cols = [&] {  // for each dst, normalise over src
        for (int d = 0; d < hc; ++d) {
            double s = 0.0;
            for (int src = 0; src < hc; ++src) s += c[d + hc * src];
            const float den = __fadd_rn(float(s), eps);
            for (int src = 0; src < hc; ++src) c[d + hc * src] = __fdiv_rn(c[d + hc * src], den);
        }
    };
    auto norm_rows = [&] {  // for each src, normalise over dst
        for (int src = 0; src < hc; ++src) {
            double s = 0.0;
            for (int d = 0; d < hc; ++d) s += c[d + hc * src];
            const float den = __fadd_rn(float(s), eps);
            for (int d = 0; d < hc; ++d) c[d + hc * src] = __fdiv_rn(c[d + hc * src], den);
        }
    };
    norm_cols();
    for (int i = 1; i < iters; ++i) {
        norm_rows();
        norm_cols();
    }
    for (int i = 0; i < hc * hc; ++i) comb[t * hc * hc + i] = c[i];
}

__global__ void hc_collapse_kernel(const float* x, int64_t ld_x, const float* pre, int hc, int64_t rows, int64_t E,
                                   float* out, int64_t ld_out) {
    wait_for_inputs();
    DS4_FOR_EACH(idx, rows * E) {
        const int64_t t = idx / E, i = idx % E;
        const float* xs = x + t * ld_x + i;
        const float* w = pre + t * hc;
        float o = __fmul_rn(xs[0], w[0]);
        for (int h = 1; h < hc; ++h) o = __fadd_rn(o, __fmul_rn(xs[int64_t(h) * E], w[h]));
        out[t * ld_out + i] = o;
    }
}

__global__ void hc_expand_kernel(const float* y, int64_t ld_y, const float* res, int64_t ld_res, const float* post,
                                 const float* comb, int hc, int64_t rows, int64_t E, float* out, int64_t ld_out) {
    wait_for_inputs();
    DS4_FOR_EACH(idx, rows * hc * E) {
        const int64_t i = idx % E, dst = (idx / E) % hc, t = idx / (E * hc);
        const float* r = res + t * ld_res + i;
        const float* c = comb + t * hc * hc;
        float o = __fmul_rn(y[t * ld_y + i], post[t * hc + dst]);
        for (int src = 0; src < hc; ++src) o = __fadd_rn(o, __fmul_rn(r[int64_t(src) * E], c[dst + hc * src]));
        out[t * ld_out + dst * E + i] = o;
    }
}

__global__ void swiglu_clamp_kernel(const float* gate, const float* up, float limit, int64_t n, float* out) {
    wait_for_inputs();
    const bool clamp = limit > 1e-6f;
    DS4_FOR_EACH(i, n) {
        float g = gate[i], u = up[i];
        if (clamp) {
            g = fminf(g, limit);
            u = fminf(fmaxf(u, -limit), limit);
        }
        out[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
    }
}

__global__ void broadcast_streams_kernel(const float* x, int64_t rows, int64_t E, int n_streams, float* streams,
                                         int64_t ld_streams) {
    wait_for_inputs();
    DS4_FOR_EACH(i, rows * n_streams * E) {
        const int64_t t = i / (n_streams * E), c = i % (n_streams * E);
        streams[t * ld_streams + c] = x[t * E + c % E];
    }
}

}  // namespace

void broadcast_streams(const float* x, int64_t rows, int64_t E, int n_streams, float* streams, int64_t ld_streams,
                       cudaStream_t stream) {
    if (rows <= 0 || E <= 0 || n_streams <= 0) return;
    launch(broadcast_streams_kernel, grid_for(rows * n_streams * E), kThreads, 0, stream, x, rows, E, n_streams, streams,
                                                                                      ld_streams);
    check_launch("broadcast_streams_kernel");
}

void hc_mixes(const float* mixes, int64_t rows, int64_t ld_mixes, const float* scale, const float* base,
              const HcParams& p, float* pre, float* post, float* comb, cudaStream_t stream) {
    if (rows <= 0) return;
    if (p.n_hc <= 0 || p.n_hc > kMaxHc)
        throw Error("CUDA hyper-connections take 1 to " + std::to_string(kMaxHc) + " streams, not " +
                    std::to_string(p.n_hc) + ".");
    launch(hc_mixes_kernel, blocks_for(rows, 128), 128, 0, stream, mixes, rows, ld_mixes, scale, base, p.n_hc, p.eps,
                                                              p.sinkhorn_iters, pre, post, comb);
    check_launch("hc_mixes_kernel");
}

void hc_collapse(const float* x, int64_t ld_x, const float* pre, int hc, int64_t rows, int64_t E, float* out,
                 int64_t ld_out, cudaStream_t stream) {
    if (rows <= 0 || E <= 0) return;
    launch(hc_collapse_kernel, grid_for(rows * E), kThreads, 0, stream, x, ld_x, pre, hc, rows, E, out, ld_out);
    check_launch("hc_collapse_kernel");
}

void hc_expand(const float* y, int64_t ld_y, const float* res, int64_t ld_res, const float* post, const float* comb,
               int hc, int64_t rows, int64_t E, float* out, int64_t ld_out, cudaStream_t stream) {
    if (rows <= 0 || E <= 0 || hc <= 0) return;
    launch(hc_expand_kernel, grid_for(rows * hc * E), kThreads, 0, stream, y, ld_y, res, ld_res, post, comb, hc, rows, E,
                                                                        out, ld_out);
    check_launch("hc_expand_kernel");
}

void swiglu_clamp(const float* gate, const float* up, float limit, int64_t n, float* out, cudaStream_t stream) {
    if (n <= 0) return;
    launch(swiglu_clamp_kernel, grid_for(n), kThreads, 0, stream, gate, up, limit, n, out);
    check_launch("swiglu_clamp_kernel");
}

}  // namespace ds4::cuda

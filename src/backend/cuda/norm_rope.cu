// RMS norm (whole rows or per-head groups) and rotary position embedding
// (NeoX / GPT-J pairing, YaRN), with the CPU backend's arithmetic: the sum of
// squares in double, the inverse norm in float, the rotation angles built by
// the same repeated multiplication.
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"

namespace ds4::cuda {
namespace {

constexpr int kNormThreads = 256;

__global__ void rms_norm_kernel(const float* x, const float* w, float eps, int64_t group, float* y) {
    const float* src = x + int64_t(blockIdx.x) * group;
    float* dst = y + int64_t(blockIdx.x) * group;
    double ss = 0.0;
    for (int64_t i = threadIdx.x; i < group; i += blockDim.x) ss += double(src[i]) * src[i];
    __shared__ double partial[kNormThreads / 32];
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
    __syncthreads();
    double total = 0.0;
    for (int i = 0; i < kNormThreads / 32; ++i) total += partial[i];
    const float inv = 1.0f / sqrtf(float(total / double(group)) + eps);
    // x and y may be the same tensor: every read above happened before the barrier.
    for (int64_t i = threadIdx.x; i < group; i += blockDim.x) dst[i] = src[i] * inv * (w ? w[i] : 1.0f);
}

struct RopeArgs {
    int n_rot, head_dim, n_heads;
    int64_t cols;
    float freq_scale, ext_factor, attn_factor, theta_scale, corr0, corr1;
    bool neox;
};

// One block per token: cos/sin per rotated pair into shared memory, then all heads.
__global__ void rope_kernel(float* x, const int32_t* positions, RopeArgs a) {
    extern __shared__ float cs[];  // n_rot values: cos, sin per pair
    const int64_t t = blockIdx.x;
    for (int pair = threadIdx.x; pair < a.n_rot / 2; pair += blockDim.x) {
        // theta_extrap = pos * theta_scale^pair, multiplied step by step as on the CPU.
        float theta_extrap = float(positions[t]);
        for (int s = 0; s < pair; ++s) theta_extrap *= a.theta_scale;
        float mscale = a.attn_factor;
        const float theta_interp = a.freq_scale * theta_extrap;
        float theta = theta_interp;
        if (a.ext_factor != 0.0f) {
            const float yv = (pair - a.corr0) / fmaxf(0.001f, a.corr1 - a.corr0);
            const float ramp = (1.0f - fminf(1.0f, fmaxf(0.0f, yv))) * a.ext_factor;
            // Rounded step by step like the CPU: an fma here moves a large
            // angle by an ulp, which cos/sin turn into a visible error.
            theta = __fadd_rn(__fmul_rn(theta_interp, __fsub_rn(1.0f, ramp)), __fmul_rn(theta_extrap, ramp));
            mscale *= 1.0f + 0.1f * logf(1.0f / a.freq_scale);
        }
        cs[2 * pair] = cosf(theta) * mscale;
        cs[2 * pair + 1] = sinf(theta) * mscale;
    }
    __syncthreads();
    const int half = a.n_rot / 2;
    for (int job = threadIdx.x; job < a.n_heads * half; job += blockDim.x) {
        const int h = job / half, pair = job % half, i0 = 2 * pair;
        float* v = x + t * a.cols + int64_t(h) * a.head_dim;
        const int ia = a.neox ? pair : i0;
        const int ic = a.neox ? pair + half : i0 + 1;
        const float x0 = v[ia], x1 = v[ic];
        v[ia] = x0 * cs[i0] - x1 * cs[i0 + 1];
        v[ic] = x0 * cs[i0 + 1] + x1 * cs[i0];
    }
}

// YaRN correction range, as in the CPU backend (ggml_rope_yarn_corr_dims).
float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * std::log(n_ctx_orig / (n_rot * 2.0f * static_cast<float>(M_PI))) / (2.0f * std::log(base));
}

}  // namespace

void rms_norm(const float* x, const float* weight, float eps, int64_t n_groups, int64_t group, float* y,
              cudaStream_t stream) {
    if (n_groups <= 0) return;
    rms_norm_kernel<<<unsigned(n_groups), kNormThreads, 0, stream>>>(x, weight, eps, group, y);
    check_launch("rms_norm_kernel");
}

void rope(float* x, int64_t rows, int64_t cols, int head_dim, const int32_t* positions, const RopeParams& p,
          cudaStream_t stream) {
    if (rows <= 0) return;
    RopeArgs a{};
    a.n_rot = p.n_rot;
    a.head_dim = head_dim;
    a.n_heads = int(cols / head_dim);
    a.cols = cols;
    a.freq_scale = p.freq_scale;
    a.ext_factor = p.ext_factor;
    a.attn_factor = p.attn_factor;
    a.theta_scale = std::pow(p.freq_base, -2.0f / p.n_rot);
    a.neox = p.neox;
    if (p.ext_factor != 0.0f) {
        const float lo = std::floor(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_fast, p.freq_base));
        const float hi = std::ceil(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_slow, p.freq_base));
        a.corr0 = std::max(0.0f, lo);
        a.corr1 = std::min(static_cast<float>(p.n_rot - 1), hi);
    }
    rope_kernel<<<unsigned(rows), 128, sizeof(float) * size_t(std::max(2, p.n_rot)), stream>>>(x, positions, a);
    check_launch("rope_kernel");
}

}  // namespace ds4::cuda

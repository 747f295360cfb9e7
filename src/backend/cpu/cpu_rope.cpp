// RoPE on the CPU: NeoX or GPT-J pairing, linear scaling and YaRN, over a
// range of each head's dimensions (DeepSeek V4 rotates only the tail), and
// its inverse. Follows ggml's rope_yarn float arithmetic step by step.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"

namespace ds4 {

namespace {

// YaRN correction range, as in the reference (ggml_rope_yarn_corr_dims).
float corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * std::log(n_ctx_orig / (n_rot * 2.0f * static_cast<float>(M_PI))) / (2.0f * std::log(base));
}

}  // namespace

void CpuBackend::rope_partial(Tensor& x, int head_dim, int offset, const IntArray& positions, const RopeParams& p,
                              bool inverse) {
    const int n_heads = static_cast<int>(x.cols / head_dim);
    const int n_rot = p.n_rot;
    if (offset < 0 || offset + n_rot > head_dim || n_rot % 2 != 0)
        throw Error("rope over dims [" + std::to_string(offset) + ", " + std::to_string(offset + n_rot) +
                    ") does not fit a head of " + std::to_string(head_dim) + ".");
    float corr[2];
    {
        const float lo = std::floor(corr_dim(n_rot, p.n_ctx_orig, p.beta_fast, p.freq_base));
        const float hi = std::ceil(corr_dim(n_rot, p.n_ctx_orig, p.beta_slow, p.freq_base));
        corr[0] = std::max(0.0f, lo);
        corr[1] = std::min(static_cast<float>(n_rot - 1), hi);
    }
    const float theta_scale = std::pow(p.freq_base, -2.0f / n_rot);
    const float sin_sign = inverse ? -1.0f : 1.0f;
    pool_.parallel_for(x.rows, 1, [&](int64_t b, int64_t e) {
        std::vector<float> cs(static_cast<size_t>(n_rot));
        for (int64_t t = b; t < e; ++t) {
            float theta_extrap = static_cast<float>(positions.data[t]);
            for (int i0 = 0; i0 < n_rot; i0 += 2) {
                float mscale = p.attn_factor;
                const float theta_interp = p.freq_scale * theta_extrap;
                float theta = theta_interp;
                if (p.ext_factor != 0.0f) {
                    const float y = (i0 / 2 - corr[0]) / std::max(0.001f, corr[1] - corr[0]);
                    const float ramp = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
                    theta = theta_interp * (1 - ramp) + theta_extrap * ramp;
                    mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
                }
                cs[i0] = std::cos(theta) * mscale;
                cs[i0 + 1] = std::sin(theta) * mscale * sin_sign;
                theta_extrap *= theta_scale;
            }
            for (int h = 0; h < n_heads; ++h) {
                float* v = x.data + t * x.cols + static_cast<int64_t>(h) * head_dim + offset;
                for (int i0 = 0; i0 < n_rot; i0 += 2) {
                    const int a = p.neox ? i0 / 2 : i0;
                    const int c = p.neox ? i0 / 2 + n_rot / 2 : i0 + 1;
                    const float x0 = v[a], x1 = v[c];
                    v[a] = x0 * cs[i0] - x1 * cs[i0 + 1];
                    v[c] = x0 * cs[i0 + 1] + x1 * cs[i0];
                }
            }
        }
    });
}

// Whole-head RoPE is the partial rotation starting at dimension 0.
void CpuBackend::rope(Tensor& x, int head_dim, const IntArray& positions, const RopeParams& p) {
    rope_partial(x, head_dim, 0, positions, p, /*inverse=*/false);
}

}  // namespace ds4

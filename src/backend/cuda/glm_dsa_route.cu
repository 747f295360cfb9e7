// Sigmoid-scored routing (DeepSeek V3 / GLM-5) on the GPU: probabilities,
// the expert groups whose two best biased scores sum highest, top-k inside
// them, weights from the unbiased probabilities. One warp per token, the
// CPU backend's arithmetic and tie rule (higher value, then lower index)
// at every choice, so both backends pick the same experts from the same
// logits.
#include <cfloat>
#include <climits>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops_glm_dsa.h"
#include "common/error.h"

namespace ds4::cuda {
namespace {

// Warp argmax over (value desc, index asc); every lane gets the winner.
__device__ void warp_argmax(float& v, int& i) {
    for (int off = 16; off > 0; off >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, v, off);
        const int oi = __shfl_xor_sync(0xffffffffu, i, off);
        if (ov > v || (ov == v && oi < i)) {
            v = ov;
            i = oi;
        }
    }
}

// The best of s[0..n) not yet taken, by the tie rule; every lane gets it.
__device__ int warp_best(const float* s, int n) {
    float v = -INFINITY;
    int i = INT_MAX;
    for (int e = threadIdx.x; e < n; e += 32)
        if (s[e] > v || (s[e] == v && e < i)) {
            v = s[e];
            i = e;
        }
    warp_argmax(v, i);
    return i;
}

__global__ void route_sigmoid_kernel(SigmoidRouteArgs a) {
    wait_for_inputs();
    extern __shared__ float sh[];
    float* prob = sh;               // n_exp
    float* sel = sh + a.n_exp;      // n_exp
    float* group = sel + a.n_exp;   // n_groups
    __shared__ int chosen[kGlmMaxUsed];
    const int64_t t = blockIdx.x;
    const int lane = threadIdx.x;
    const float* l = a.logits + t * a.n_exp;
    for (int e = lane; e < a.n_exp; e += 32) {
        const float p = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-l[e])));
        prob[e] = p;
        sel[e] = a.bias ? __fadd_rn(p, a.bias[e]) : p;
    }
    __syncwarp();
    if (a.n_groups > 1) {
        const int per = a.n_exp / a.n_groups;
        for (int g = lane; g < a.n_groups; g += 32) {
            const float* s = sel + g * per;
            float x = -INFINITY, y = -INFINITY;  // the two best, as the CPU scans them
            for (int i = 0; i < per; ++i) {
                if (s[i] > x) {
                    y = x;
                    x = s[i];
                } else if (s[i] > y) {
                    y = s[i];
                }
            }
            group[g] = per > 1 ? __fadd_rn(x, y) : x;
        }
        __syncwarp();
        // Mark the n_group_used best groups by overwriting their score with
        // +inf (a taken group); the rest are then masked out of sel.
        for (int k = 0; k < a.n_group_used; ++k) {
            float v = -INFINITY;
            int i = INT_MAX;
            for (int g = lane; g < a.n_groups; g += 32)
                if (group[g] != INFINITY && (group[g] > v || (group[g] == v && g < i))) {
                    v = group[g];
                    i = g;
                }
            warp_argmax(v, i);
            __syncwarp();
            if (lane == 0) group[i] = INFINITY;
            __syncwarp();
        }
        for (int e = lane; e < a.n_exp; e += 32)
            if (group[e / per] != INFINITY) sel[e] = -INFINITY;
        __syncwarp();
    }
    for (int j = 0; j < a.n_used; ++j) {
        const int i = warp_best(sel, a.n_exp);
        __syncwarp();
        if (lane == 0) {
            chosen[j] = i;
            // Taken. A masked expert is -inf too, but never the best of a
            // round: the kept groups hold at least n_used experts.
            sel[i] = -INFINITY;
        }
        __syncwarp();
    }
    if (lane == 0) {
        double wsum = 0.0;  // ggml_sum_rows sums in double
        for (int j = 0; j < a.n_used; ++j) wsum += prob[chosen[j]];
        const float denom = fmaxf(float(wsum), 6.103515625e-5f);
        for (int j = 0; j < a.n_used; ++j) {
            float w = prob[chosen[j]];
            if (a.norm) w = __fdiv_rn(w, denom);
            if (a.w_scale != 0.0f && a.w_scale != 1.0f) w = __fmul_rn(w, a.w_scale);
            a.experts[t * a.n_used + j] = chosen[j];
            a.weights[t * a.n_used + j] = w;
        }
    }
}

}  // namespace

void glm_route_sigmoid(const SigmoidRouteArgs& a, cudaStream_t stream) {
    if (a.n_tok <= 0) return;
    if (a.n_used <= 0 || a.n_used > a.n_exp || a.n_used > kGlmMaxUsed)
        throw Error("CUDA routing supports 1 to " + std::to_string(kGlmMaxUsed) + " of the experts per token, not " +
                    std::to_string(a.n_used) + " of " + std::to_string(a.n_exp) + ".");
    const size_t shmem = sizeof(float) * (2 * size_t(a.n_exp) + size_t(a.n_groups > 1 ? a.n_groups : 0));
    launch(route_sigmoid_kernel, unsigned(a.n_tok), 32, shmem, stream, a);
    check_launch("route_sigmoid_kernel");
}

}  // namespace ds4::cuda

// The routing of one token by one warp (route_warp_row), shared by
// moe_decode.cu's route_warp_kernel and quant_matmul.cu's router_topk_kernel
// (the router's product and its routing in one launch), so both give the
// same bits.
#pragma once

#include <cfloat>
#include <climits>
#include <cstdint>

namespace ds4::cuda {
namespace {

// route_kernel without shared memory or barriers, for up to 32 * kPer
// experts and 32 used, not forced: lane l holds experts l, l + 32, ... in
// registers, a top-k round is the lanes' own best then shuffles, and lane j
// finishes slot j. The same expressions in the same order as route_kernel
// (each lane's share of the softmax sum, the shuffle tree, the weights' sum
// over the slots in order), so the same bits. route_kernel's rounds each
// waited on shared memory and three barriers: 7.8 us a Qwen3 layer (128
// experts, 8 used; ncu, H200, 2026-12-04).
//
// One warp routes one token: l its n_exp logits, its n_used choices and
// weights into experts / weights. The logits are read through L2 (__ldcg):
// router_topk_kernel's last block reads logits other blocks of its launch
// wrote.
template <bool kSoftmax, int kPer>
__device__ __forceinline__ void route_warp_row(const float* __restrict__ l, int n_exp, int n_used,
                                               const float* __restrict__ bias, bool norm, float w_scale,
                                               int32_t* experts, float* weights) {
    const int lane = threadIdx.x & 31;
    float score[kPer], sel[kPer];
#pragma unroll
    for (int u = 0; u < kPer; ++u) score[u] = sel[u] = -INFINITY;
    if constexpr (kSoftmax) {
        float lv[kPer];
        float mx = -FLT_MAX;
#pragma unroll
        for (int u = 0; u < kPer; ++u) {
            const int e = lane + 32 * u;
            lv[u] = e < n_exp ? __ldcg(l + e) : 0.0f;
            if (e < n_exp) mx = fmaxf(mx, lv[u]);
        }
        // The maximum does not depend on the order it is taken in.
        for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
        double part = 0.0;
#pragma unroll
        for (int u = 0; u < kPer; ++u)
            if (lane + 32 * u < n_exp) {
                score[u] = expf(lv[u] - mx);
                part += score[u];
            }
        for (int off = 16; off > 0; off >>= 1) part += __shfl_xor_sync(0xffffffffu, part, off);
        const double sum = 0.0 + part;  // route_kernel: 0 + the one warp's total
#pragma unroll
        for (int u = 0; u < kPer; ++u)
            if (lane + 32 * u < n_exp) sel[u] = score[u] = float(score[u] / sum);
    } else {
#pragma unroll
        for (int u = 0; u < kPer; ++u) {
            const int e = lane + 32 * u;
            if (e < n_exp) {
                const float le = __ldcg(l + e);
                const float sp = le > 20.0f ? le : logf(1.0f + expf(le));
                score[u] = sqrtf(sp);
                sel[u] = bias ? score[u] + bias[e] : score[u];
            }
        }
    }
    int my_expert = 0;
    float my_score = 0.0f;
    for (int j = 0; j < n_used; ++j) {
        float v = -FLT_MAX;
        int i = INT_MAX;
#pragma unroll
        for (int u = 0; u < kPer; ++u) {
            const int e = lane + 32 * u;
            if (e < n_exp && (sel[u] > v || (sel[u] == v && e < i))) {
                v = sel[u];
                i = e;
            }
        }
        for (int off = 16; off > 0; off >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, v, off);
            const int oi = __shfl_xor_sync(0xffffffffu, i, off);
            if (ov > v || (ov == v && oi < i)) {
                v = ov;
                i = oi;
            }
        }
        // The winner's lane takes it out of the running and hands its score to lane j.
        float s = 0.0f;
        if (lane == (i & 31)) {
#pragma unroll
            for (int u = 0; u < kPer; ++u)
                if (u == i / 32) {
                    s = score[u];
                    sel[u] = -INFINITY;
                }
        }
        s = __shfl_sync(0xffffffffu, s, i & 31);
        if (lane == j) {
            my_expert = i;
            my_score = s;
        }
    }
    double wsum = 0.0;
    for (int j = 0; j < n_used; ++j) wsum += __shfl_sync(0xffffffffu, my_score, j);
    if (lane < n_used) {
        float w;
        if constexpr (kSoftmax) {
            const double denom = norm ? fmax(wsum, 6.103515625e-5) : 1.0;
            w = float(my_score / denom);
        } else {
            const float denom = norm ? fmaxf(float(wsum), 6.103515625e-5f) : 1.0f;
            w = norm ? my_score / denom : my_score;
        }
        if (w_scale != 0.0f && w_scale != 1.0f) w *= w_scale;
        experts[lane] = my_expert;
        weights[lane] = w;
    }
}

}  // namespace
}  // namespace ds4::cuda

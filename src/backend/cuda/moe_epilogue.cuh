// The per-row arithmetic that follows the routed-expert dot products, shared
// by the float (moe_decode.cu) and int8-activation (q8_matvec.cu) decode
// kernels so both end exactly as the five-launch path (expert_swiglu_kernel,
// expert_combine_kernel) does.
#pragma once

#include <cstdint>

namespace ds4::cuda {
namespace {

// An expert's scale: one for all experts (n == 1), one per expert, or none.
__device__ __forceinline__ float expert_factor(const float* s, int64_t n, int64_t e) {
    return s ? s[n == 1 ? 0 : e] : 1.0f;
}

// SwiGLU of expert e's gate and up values, scaled and (limit > 1e-6) clamped.
__device__ __forceinline__ float expert_swiglu_value(float gv, float uv, int64_t e, const float* gs, int64_t n_gs,
                                                     const float* us, int64_t n_us, float limit) {
    if (gs) gv *= expert_factor(gs, n_gs, e);
    if (us) uv *= expert_factor(us, n_us, e);
    if (limit > 1e-6f) {
        gv = fminf(gv, limit);
        uv = fminf(fmaxf(uv, -limit), limit);
    }
    return gv / (1.0f + expf(-gv)) * uv;
}

// Sum over the slots of token t, in slot order, of part[j] * (weight of
// pair t * n_used + j) * (its expert's down scale).
template <class Part>
__device__ __forceinline__ float weighted_slot_sum(Part part, int64_t t, int n_used, const int32_t* experts,
                                                   const float* weights, const float* ds, int64_t n_ds) {
    float sum = 0.0f;
    for (int j = 0; j < n_used; ++j) {
        const int64_t p = t * n_used + j;
        sum += part(j) * (weights[p] * expert_factor(ds, n_ds, experts[p]));
    }
    return sum;
}

// Pair p's factor in weighted_slot_sum: its routing weight times the down
// scale of its expert e = experts[p]. The per-pair down kernels have each
// slot's warp load it before its dot (the loads then overlap the dot
// instead of following the block's barrier one slot after another) and sum
// with slot_sum, whose expression is weighted_slot_sum's.
__device__ __forceinline__ float slot_factor(int64_t p, int64_t e, const float* weights, const float* ds, int64_t n_ds) {
    return weights[p] * expert_factor(ds, n_ds, e);
}
template <class Part, class Factor>
__device__ __forceinline__ float slot_sum(Part part, Factor factor, int n_used) {
    float sum = 0.0f;
    for (int j = 0; j < n_used; ++j) sum += part(j) * factor(j);
    return sum;
}

}  // namespace
}  // namespace ds4::cuda

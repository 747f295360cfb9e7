// Kernel launchers of GLM-5's (glm-dsa) op pack on CUDA (glm_dsa_*.cu).
// Pointers are device pointers; everything runs on `stream`, in order, and
// reads its ids (positions, slots, row sets) on the device, so a decode
// step of these ops can be recorded as a CUDA graph. Semantics are the CPU
// backend's (cpu_ops_glm_dsa.cpp); where the CPU's float order decides a
// discrete choice (the experts routing picks) the kernels repeat it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_ops_deepseek4.h"

namespace ds4::cuda {

// ---- glm_dsa_rows.cu --------------------------------------------------------
// cache[slots[t] * slot_rows + positions[t]][0..cols) = rows[t] for t < n;
// a row outside the cache's n_cache rows is skipped (the session checks
// positions against the context before the step; the kernel cannot throw).
void glm_cache_store(const float* rows, int64_t ld_rows, const int32_t* positions, const int32_t* slots,
                     int64_t slot_rows, int64_t n, int64_t cols, float* cache, int64_t n_cache, cudaStream_t stream);
// count[t] = positions[t] + 1, base[t] = slots[t] * slot_rows.
void glm_plan_causal(const int32_t* positions, const int32_t* slots, int64_t slot_rows, int64_t n, int32_t* count,
                     int32_t* base, cudaStream_t stream);
// dst[t][h * width + i] = src[t][h * head_dim + offset + i].
void glm_head_columns(const float* src, int64_t ld_src, int64_t rows, int n_heads, int head_dim, int offset,
                      int width, float* dst, int64_t ld_dst, cudaStream_t stream);

// ---- glm_dsa_norm.cu ----------------------------------------------------------
// ggml_norm per row of n values, then * weight + bias (either may be null).
void glm_layer_norm(const float* x, int64_t rows, int64_t n, const float* weight, const float* bias, float eps,
                    float* y, cudaStream_t stream);

// ---- glm_dsa_route.cu ---------------------------------------------------------
// The most experts one token may use (the chosen ids sit in shared memory).
constexpr int kGlmMaxUsed = 64;
struct SigmoidRouteArgs {
    const float* logits;  // [n_tok x n_exp]
    const float* bias;    // n_exp or null
    int64_t n_tok;
    int n_exp, n_used, n_groups, n_group_used;
    bool norm;
    float w_scale;
    int32_t* experts;  // [n_tok x n_used]
    float* weights;    // [n_tok x n_used]
};
void glm_route_sigmoid(const SigmoidRouteArgs& a, cudaStream_t stream);

// ---- glm_dsa_attention.cu -----------------------------------------------------
struct LatentAttentionArgs {
    const float* q_lat;   // [T x n_head * d_lat]
    const float* q_pe;    // [T x n_head * d_pe]
    const float* latent;  // cache rows [.. x d_lat]: keys' latent part = values
    const float* pe;      // cache rows [.. x d_pe]
    RowSetsView rows;     // the cache rows each query row attends to
    float* out;           // [T x n_head * d_lat]
    int64_t n_tok;
    int n_head, d_lat, d_pe;
    float scale;
    // Split-K (latent_attention_splits): each (row, head)'s set cut into
    // n_split ranges; with n_split > 1, part_o holds T * n_head * n_split *
    // d_lat floats and part_ml twice T * n_head * n_split.
    int n_split = 1;
    float* part_o = nullptr;
    float* part_ml = nullptr;
};
// Splits for n_tok query rows of n_head heads over sets of up to max_rows
// cache rows (shapes only, so a recorded step keeps them).
int latent_attention_splits(int64_t n_tok, int n_head, int64_t max_rows);
// The widest latent and RoPE parts the kernel takes (GLM-5: 512 and 64).
constexpr int kLatentMaxDim = 512;
constexpr int kLatentMaxPe = 128;
void glm_attention_latent(const LatentAttentionArgs& a, cudaStream_t stream);

}  // namespace ds4::cuda

// Kernel launchers of DeepSeek V4's ops on CUDA (dsv4_*.cu). Pointers are
// device pointers unless named host_*; everything runs on `stream`, in
// order. Semantics are the CPU backend's (cpu_ops_deepseek4.cpp,
// cpu_rope.cpp); where the CPU's float order decides a discrete choice (the
// indexer's top-k) the kernels repeat it with unfused, correctly rounded
// operations so both backends pick the same rows.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "models/deepseek4/dsv4_ops.h"

namespace ds4::cuda {

// ---- dsv4_hyper.cu ------------------------------------------------------------
// The most hyper-connection streams the mixes kernel keeps in registers.
constexpr int kMaxHc = 8;
// mixes [rows x ld_mixes]; scale 3 values, base (2 + hc) * hc values.
// post / comb may be null.
void hc_mixes(const float* mixes, int64_t rows, int64_t ld_mixes, const float* scale, const float* base,
              const HcParams& p, float* pre, float* post, float* comb, cudaStream_t stream);
// out[t][i] = sum_h pre[t][h] * x[t][h * E + i]
void hc_collapse(const float* x, int64_t ld_x, const float* pre, int hc, int64_t rows, int64_t E, float* out,
                 int64_t ld_out, cudaStream_t stream);
// out[t][dst * E + i] = post[t][dst] * y[t][i] + sum_src comb[t][dst + hc * src] * res[t][src * E + i]
void hc_expand(const float* y, int64_t ld_y, const float* res, int64_t ld_res, const float* post, const float* comb,
               int hc, int64_t rows, int64_t E, float* out, int64_t ld_out, cudaStream_t stream);
// silu(min(gate, limit)) * clamp(up, -limit, limit); limit <= 1e-6: no clamp.
void swiglu_clamp(const float* gate, const float* up, float limit, int64_t n, float* out, cudaStream_t stream);

// ---- dsv4_compress.cu ---------------------------------------------------------
struct PoolSources {
    const float* state_kv;
    const float* state_score;
    int64_t n_state, ld_state_kv, ld_state_score;
    const float* kv;
    const float* score;
    int64_t ld_kv, ld_score;
};
// out[b][d] = softmax-over-sources(score)[d]-weighted sum of kv[d]; sources
// [n_blocks x per_block] device ids into [state rows | chunk rows], -1 empty.
void compress_pool(const PoolSources& s, const int32_t* sources, int per_block, bool overlap, int64_t n_blocks,
                   int64_t D, float* out, cudaStream_t stream);
// dst[host_dst_rows[i]][0..cols) = src[host_src_rows[i]][0..cols) for i < n;
// the row ids travel as kernel parameters (no upload, no host sync). Later
// pairs win over earlier ones writing the same row, as on the CPU.
void copy_rows(const float* src, int64_t ld_src, const int32_t* host_src_rows, float* dst, int64_t ld_dst,
               const int32_t* host_dst_rows, int64_t n, int64_t cols, cudaStream_t stream);

// ---- dsv4_indexer.cu ----------------------------------------------------------
// scores[t][j] (row stride ld_scores) = sum_h w[t][h] * relu(q[t][h] . keys[j])
// for j < n_visible[t] (device), rows t < n_rows; the CPU's float order.
void indexer_scores(const float* q, int64_t ld_q, const float* w, int64_t ld_w, int n_head, int head_dim,
                    const float* keys, const int32_t* n_visible, int64_t n_rows, int64_t max_visible,
                    float* scores, int64_t ld_scores, cudaStream_t stream);
// For every row with n_visible[t] > top_k: the top_k best j (ties: lower j
// first) in ascending order into out[t * top_k ..]; other rows untouched.
void indexer_select_topk(const float* scores, int64_t ld_scores, const int32_t* n_visible, int64_t n_rows,
                         int64_t top_k, int32_t* out, cudaStream_t stream);

// ---- dsv4_attention.cu --------------------------------------------------------
struct WindowSinkArgs {
    const float* q;       // [T x n_head * D]
    const float* k;       // [T x ld_k]: this chunk's keys (= values)
    const float* window;  // ring [n_swa x ld_window], row = position % n_swa
    const float* comp;    // compressed rows [.. x ld_comp] or null
    const int32_t* comp_offsets;  // T + 1 (device) or null
    const int32_t* comp_rows;
    const float* sinks;   // n_head
    float* out;           // [T x n_head * D]
    int64_t n_tok, pos0, n_swa, ld_k, ld_window, ld_comp;
    int n_head, head_dim;
    float scale;
};
// The longest head the kernel takes.
constexpr int kWindowSinkMaxHeadDim = 512;
void attention_window_sink(const WindowSinkArgs& a, cudaStream_t stream);

}  // namespace ds4::cuda

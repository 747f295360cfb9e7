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

// streams[t][h * E + i] = x[t][i] for h < n_streams.
void broadcast_streams(const float* x, int64_t rows, int64_t E, int n_streams, float* streams, int64_t ld_streams,
                       cudaStream_t stream);

// ---- dsv4_plans.cu ------------------------------------------------------------
// The index plans of Dsv4Ops (CpuBackend's cpu_dsv4_plans.cpp, row for row).
void plan_rows(const int32_t* positions, const int32_t* slots, int64_t n, int32_t* run_first, int32_t* run_last,
               cudaStream_t stream);
void plan_ring(const int32_t* positions, const int32_t* slots, const int32_t* run_last, int64_t n, int64_t ring,
               int32_t* dst, cudaStream_t stream);
struct CompressorPlanArgs {
    const int32_t *positions, *slots, *run_first;
    int64_t n;
    int ratio;
    bool overlap;
    int64_t ring, cache_rows;
    int32_t *in_block, *sources, *block_pos, *cache_dst, *visible_count, *visible_base;
};
void plan_compressor(const CompressorPlanArgs& a, cudaStream_t stream);

// ---- dsv4_compress.cu ---------------------------------------------------------
struct PoolSources {
    const float* kv;  // this batch's rows: ids [0, n_chunk)
    const float* score;
    int64_t n_chunk, ld_kv, ld_score;
    const float* state_kv;  // ring rows of every slot: ids [n_chunk, ...)
    const float* state_score;
    int64_t ld_state_kv, ld_state_score;
};
// out[b][d] = softmax-over-sources(score)[d]-weighted sum of kv[d]; sources
// [n_blocks x per_block] device ids into [chunk rows | state rows], -1
// empty; a row without sources is 0.
void compress_pool(const PoolSources& s, const int32_t* sources, int per_block, bool overlap, int64_t n_blocks,
                   int64_t D, float* out, cudaStream_t stream);
// dst[dst_rows[i]][0..cols) = src[i][0..cols) for i < n; -1 skips a row.
void scatter_rows(const float* src, int64_t ld_src, const int32_t* dst_rows, int64_t n, float* dst, int64_t ld_dst,
                  int64_t cols, cudaStream_t stream);

// ---- dsv4_indexer.cu ----------------------------------------------------------
// A RowSets in device memory (rows null: the contiguous form).
struct RowSetsView {
    const int32_t* count;
    const int32_t* base;
    const int32_t* rows;
    int64_t cap;
};
// scores[t][j] (row stride ld_scores) = sum_h w[t][h] * relu(q[t][h] . keys[row j of t's set])
// for j < count[t], rows t < n_rows; the CPU's float order.
void indexer_scores(const float* q, int64_t ld_q, const float* w, int64_t ld_w, int n_head, int head_dim,
                    const float* keys, const RowSetsView& visible, int64_t n_rows, float* scores, int64_t ld_scores,
                    cudaStream_t stream);
// Per row: the top_k best of its set (ties: lower j first) in ascending
// order as key row ids into out_rows[t * top_k ..], their number into
// out_count[t]; a set of no more than top_k is copied whole.
void indexer_select_topk(const float* scores, int64_t ld_scores, const RowSetsView& visible, int64_t n_rows,
                         int64_t top_k, int32_t* out_rows, int32_t* out_count, cudaStream_t stream);

// ---- dsv4_attention.cu --------------------------------------------------------
struct WindowSinkArgs {
    const float* q;       // [T x n_head * D]
    const float* k;       // [T x ld_k]: this batch's keys (= values)
    const float* window;  // rings [slots * n_swa x ld_window], row = slot * n_swa + position % n_swa
    const int32_t *positions, *run_first, *slots;  // [T]
    const float* comp;    // compressed rows [.. x ld_comp] or null
    RowSetsView comp_rows;
    const float* sinks;   // n_head
    float* out;           // [T x n_head * D]
    int64_t n_tok, n_swa, ld_k, ld_window, ld_comp;
    int n_head, head_dim;
    float scale;
};
// The longest head the kernel takes.
constexpr int kWindowSinkMaxHeadDim = 512;
void attention_window_sink(const WindowSinkArgs& a, cudaStream_t stream);

}  // namespace ds4::cuda

// Kernel launchers of the CUDA backend, one group per .cu file. Pointers are
// device pointers unless named host_*; everything runs on `stream`, in order.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/backend.h"
#include "gguf/ggml_type.h"

namespace ds4::cuda {

// ---- quant_matmul.cu: everything that decodes ggml blocks ------------------
// Copies the codebooks (IQ2_XXS grid) into the current device; once per device.
void init_quant_tables();
bool quant_type_supported(GgmlType type);
// The most tokens matvec takes (a decode batch); more go through gemm_f16
// (mma_gemm.cu), or with --exact through dequantize + cuBLAS. Its kernels
// take kMatvecTile tokens at a time: the row-per-block kernel loops over the
// tiles with the row in L1, the others launch per tile.
// A batch of 16 once went through cuBLAS, decoding every matrix to float per
// step (2026-12-02, H200: 21 ms of a 46 ms step at 16 sequences).
constexpr int64_t kMatvecMaxTokens = 64;
constexpr int64_t kMatvecTile = 8;
// dst[r][0..k) = decoded row r of `w` (row r at w + r * row_bytes), r < n_rows;
// with `ids`, row r is table row ids[r] instead.
void dequantize_rows(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t k, int64_t n_rows,
                     const int32_t* ids, float* dst, int64_t ld_dst, cudaStream_t stream);
// dst row (i * n_rows + r) = decoded row r of matrix matrices[i] (matrix m at
// w + m * matrix_bytes), for i < n_matrices, r < n_rows.
void dequantize_matrices(GgmlType type, const uint8_t* w, size_t matrix_bytes, size_t row_bytes, int64_t k,
                         int64_t n_rows, const int32_t* matrices, int64_t n_matrices, float* dst, cudaStream_t stream);
// The same product over `count` matrices in one launch (grid y): matrix g
// at w + g * w_stride, its input columns at x + g * x_stride, its outputs at
// y + g * y_stride. DeepSeek V4's and GLM-5's per-head projections launched
// a matvec per head: 128 launches a GLM-5 layer, 3.7 ms of a 5.3 ms decode
// step (ncu, H200, 2026-12-04).
struct MatvecGroups {
    int64_t count = 1;
    size_t w_stride = 0;
    int64_t x_stride = 0, y_stride = 0;
};
// y[t][r] = sum_i W[r][i] x[t][i] for t < n_tok (<= kMatvecMaxTokens), decoding W on the fly.
void matvec(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t k, int64_t n_rows, const float* x,
            int64_t ld_x, int64_t n_tok, float* y, int64_t ld_y, cudaStream_t stream, const MatvecGroups& groups = {});

// ---- gemm_frag.cu: gemm_f16 for Q4_K and Q6_K rows, weights decoded into the mma fragments ----
// Whether it takes these rows: Q4_K (16-byte aligned) or Q6_K (2-byte aligned), whole super-blocks.
bool gemm_frag_usable(GgmlType type, const uint8_t* w, size_t matrix_bytes, size_t row_bytes, int64_t k);
// gemm_f16's contract (same arguments, same numbers) for rows gemm_frag_usable takes.
void gemm_frag(GgmlType type, const uint8_t* w, size_t matrix_bytes, size_t row_bytes, int64_t k, int64_t n_rows,
               const int32_t* tiles, int64_t n_tiles, int64_t n_tok, const uint16_t* xh, int64_t ld_h,
               const float* scale, float* y, int64_t ld_y, cudaStream_t stream);

// ---- small_f32_gemm.cu ----
// y[t][r] = sum_i W[r][i] x[t][i] in FP32 for any number of tokens: small F32
// matrices (routers) in prefill, where cuBLAS and the matvec kernels were slow.
void small_f32_gemm(const float* w, int64_t ld_w, int64_t k, int64_t n_rows, const float* x, int64_t ld_x,
                    int64_t n_tok, float* y, int64_t ld_y, cudaStream_t stream);

// ---- mma_gemm.cu: prefill products on the tensor cores (f16 in, f32 out) ----
// Tokens a gemm_f16 block computes: a tile list entry holds at most this many.
constexpr int64_t kGemmTileTokens = 64;
// Half rows (rows_to_half) are padded to a multiple of this many values.
constexpr int64_t kHalfRowAlign = 256;
void init_mma_gemm_tables();
// Whether gemm_f16 takes rows of k values of this type (k % 32 == 0; F32
// and BF16 weights keep the FP32 path).
bool gemm_f16_supported(GgmlType type, int64_t k);
// The row stride rows_to_half wants for rows of k values.
int64_t half_row_stride(int64_t k);
// xh[r] (f16 bits, stride ld_h, zero padded) = x[rows ? rows[r] : r] / scale[r],
// scale[r] the power of two that puts the row's largest magnitude in
// [2^14, 2^15) (1 for an all-zero, infinite or NaN row), for r < n.
void rows_to_half(const float* x, int64_t ld_x, const int32_t* rows, int64_t n, int64_t k, uint16_t* xh,
                  int64_t ld_h, float* scale, cudaStream_t stream);
// y[row0 + t][m] = scale[row0 + t] * sum_i W_e[m][i] xh[row0 + t][i], for every
// tile (e, row0, n) of `tiles` (3 ints each, n <= kGemmTileTokens; W_e at
// w + e * matrix_bytes) and t < n, m < n_rows; a tile of 0 rows computes
// nothing. Without tiles: matrix 0 and token rows [0, n_tok) (n_tiles is then ignored).
void gemm_f16(GgmlType type, const uint8_t* w, size_t matrix_bytes, size_t row_bytes, int64_t k, int64_t n_rows,
              const int32_t* tiles, int64_t n_tiles, int64_t n_tok, const uint16_t* xh, int64_t ld_h,
              const float* scale, float* y, int64_t ld_y, cudaStream_t stream);

// ---- moe_tiles.cu: a grouped MoE product's tile list, on the device ----------
constexpr int64_t kMoeTileMaxExperts = 4096;  // three ints an expert in one block's shared memory
// Entries the tile list of n_pairs pairs over n_exp experts can need: the
// size of `tiles` (3 ints each) and of gemm_f16's grid.
int64_t moe_max_tiles(int64_t n_pairs, int64_t n_exp);
// The pairs p < n_pairs (expert experts[p], token p / n_used) as rows grouped
// by expert, in expert order: row r is pair pair_of_row[r] of token
// token_of_row[r] and expert expert_of_row[r]; tiles: (e, first row, rows <=
// kGemmTileTokens) for each expert's rows, then (0, 0, 0) up to
// moe_max_tiles, which gemm_f16 skips. Each output array holds n_pairs ints.
void moe_tile_list(const int32_t* experts, int64_t n_pairs, int64_t n_exp, int n_used, int32_t* token_of_row,
                   int32_t* pair_of_row, int32_t* expert_of_row, int32_t* tiles, cudaStream_t stream);

// ---- rms_norm.cu ------------------------------------------------------------
// n_groups groups of `group` contiguous values; weight (length group) optional.
void rms_norm(const float* x, const float* weight, float eps, int64_t n_groups, int64_t group, float* y,
              cudaStream_t stream);
// x += d, then y = rms_norm of the whole rows (bit for bit add then rms_norm).
void add_rms_norm(float* x, const float* d, const float* weight, float eps, int64_t n_rows, int64_t cols, float* y,
                  cudaStream_t stream);

// ---- rope.cu ------------------------------------------------------------------
// RoPE on dims [offset, offset + p.n_rot) of every head (cols = n_heads *
// head_dim), at positions[t] (device); `inverse` negates the sine. Whole-head
// RoPE (qwen3moe) is offset 0, forward.
void rope_partial(float* x, int64_t rows, int64_t cols, int head_dim, int offset, const int32_t* positions,
                  const RopeParams& p, bool inverse, cudaStream_t stream);
// Whether qk_norm_rope takes heads of head_dim values with these RoPE
// parameters (whole-head rotation).
bool qk_norm_rope_supported(int head_dim, const RopeParams& p);
// Per-head RMS norm (weights of head_dim values, optional) then whole-head RoPE
// at positions[t], of the n_head_q heads of q's rows and the n_head_k of k's.
void qk_norm_rope(float* q, float* k, int64_t n_tok, int n_head_q, int n_head_k, int head_dim, const float* q_norm,
                  const float* k_norm, float eps, const int32_t* positions, const RopeParams& p, cudaStream_t stream);
// qk_norm_rope, then row t's rotated k and its v (v_cols values) into cache
// row slots[t] * slot_rows + positions[t] of k_cache / v_cache (rows outside
// their slot or the cache_rows are dropped, as kv_store does): one launch.
void qk_norm_rope_store(float* q, float* k, const float* v, int64_t n_tok, int n_head_q, int n_head_k, int head_dim,
                        int64_t v_cols, const float* q_norm, const float* k_norm, float eps, const int32_t* positions,
                        const int32_t* slots, int64_t slot_rows, int64_t cache_rows, float* k_cache, float* v_cache,
                        const RopeParams& p, cudaStream_t stream);

// ---- attention.cu -------------------------------------------------------------
// Key splits for n_tok query rows of the heads p against sequences of up to
// slot_rows cached rows (depends on shapes only, so recorded steps stay valid).
int attention_splits(int64_t n_tok, const AttentionParams& p, int64_t slot_rows);
// Causal GQA attention: query row t against its slot's cache rows
// slots[t] * slot_rows + [0, positions[t]] (slots, positions on the device).
// Rows are contiguous: q [T x n_head*dk], caches [slots*slot_rows x n_kv*d].
// With n_split > 1, part_o holds T*n_head*n_split*dv floats and part_ml
// twice T*n_head*n_split. merge_count (merge_counts unsigned values, zero
// before and after): the last split block of each (row, head) merges them,
// one launch instead of two, where T*n_head <= merge_counts.
void attention(const float* q, int64_t n_tok, const float* k_cache, int64_t ld_k, const float* v_cache,
               int64_t ld_v, const int32_t* positions, const int32_t* slots, int64_t slot_rows,
               const AttentionParams& p, int n_split, float* part_o, float* part_ml, float* out, cudaStream_t stream,
               unsigned* merge_count = nullptr, int64_t merge_counts = 0);
// ---- attention_tc.cu ------------------------------------------------------------
// The same causal GQA attention on the tensor cores (TF32 operands, f32
// sums), for batches where sequences have many query rows (prefill): a warp
// serves 16 query rows of one KV head from one copy of each key tile.
// Batches whose sequences have fewer rows than this keep attention().
constexpr int64_t kTcMinSeqRows = 16;
// Whether attention_tc takes these heads and caches: n_head / n_head_kv in
// {1, 2, 4, 8, 16}, dk = dv in {64, 128}, caches 16-byte aligned with ld_k,
// ld_v multiples of 4, and DS4_CUDA_ATTN_TC not "0".
bool attention_tc_shape(const AttentionParams& p, const float* k_cache, int64_t ld_k, const float* v_cache, int64_t ld_v);
// out [T x n_head*dv].
void attention_tc(const float* q, int64_t n_tok, const float* k_cache, int64_t ld_k, const float* v_cache, int64_t ld_v,
                  const int32_t* positions, const int32_t* slots, int64_t slot_rows, const AttentionParams& p, float* out,
                  cudaStream_t stream);
// Merges split-K partial results: row t, head h's output (dv values at
// out + t * ld_o + h * dv) from its n_split unnormalised partials (part_o at
// ((t * n_head + h) * n_split + s) * dv, (max, sum) pairs in part_ml); a
// split whose sum is 0 saw no rows. Used by the latent attention too.
void attention_merge(const float* part_o, const float* part_ml, int64_t n_tok, int n_head, int n_split, int dv,
                     int64_t ld_o, float* out, cudaStream_t stream);
// k_cache row slots[t] * slot_rows + positions[t] = k row t (likewise v),
// t < n_tok; rows outside the cache of cache_rows rows are dropped.
void kv_store(const float* k, int64_t k_cols, const float* v, int64_t v_cols, const int32_t* positions,
              const int32_t* slots, int64_t slot_rows, int64_t n_tok, int64_t cache_rows, float* k_cache,
              float* v_cache, cudaStream_t stream);
// dst row i = src row rows[i] for i < n (rows on the device); cols floats each.
void gather_rows(const float* src, int64_t src_rows, const int32_t* rows, int64_t n, int64_t cols, float* dst,
                 cudaStream_t stream);

// ---- top_k_rows.cu ----------------------------------------------------------------
// Backend::top_k_rows on the device: values [rows x k], ids [rows * k],
// first_bad [rows]; 1 <= k <= 128.
void top_k_rows(const float* x, int64_t rows, int64_t cols, int k, float* values, int32_t* ids, int32_t* first_bad,
                cudaStream_t stream);

// ---- moe_decode.cu --------------------------------------------------------------
void init_moe_decode_tables();
void init_moe_grouped_tables();
enum class RouteScore { Softmax, SqrtSoftplus };
// Per token: scores of n_exp logits, top-n_used of score (+ bias) unless
// `forced` names the experts: row forced_rows[t] (or t when null) of
// [.. x n_used] ids; weights as the CPU backend.
void route_topk(RouteScore kind, const float* logits, int64_t n_tok, int n_exp, int n_used, const float* bias,
                const int32_t* forced, const int32_t* forced_rows, bool norm, float w_scale, int32_t* experts,
                float* weights, cudaStream_t stream);
// logits = W x (W: n_exp F32 rows of k) for n_tok <= 4 tokens, then
// route_topk's softmax choice of them, in one launch; counter: a device
// unsigned, zero before and after. For the shapes router_topk_supported
// takes (else it throws; the caller runs the two).
bool router_topk_supported(const uint8_t* w, size_t row_bytes, int64_t k, int64_t n_exp, const float* x, int64_t ld_x,
                           int64_t n_tok, int n_used);
void router_topk(const uint8_t* w, size_t row_bytes, int64_t k, int64_t n_exp, const float* x, int64_t ld_x,
                 int64_t n_tok, float* logits, int n_used, bool norm, float w_scale, int32_t* experts, float* weights,
                 unsigned* counter, cudaStream_t stream);
// counts[e] += the pairs among experts[0..n_pairs) that chose e, e < n_counts.
void count_experts(const int32_t* experts, int64_t n_pairs, int32_t* counts, int64_t n_counts, cudaStream_t stream);
// Whether expert_matvec handles expert rows of k elements of this type.
bool expert_matvec_supported(GgmlType type, int64_t k);
// y[p][r] = W_{experts[p]}[r] . x[p / x_div] for pairs p < n_pairs, rows r < n_rows
// (W_e at w + e * matrix_bytes).
void expert_matvec(GgmlType type, const uint8_t* w, size_t matrix_bytes, size_t row_bytes, int64_t k, int64_t n_rows,
                   const int32_t* experts, int64_t n_pairs, int x_div, const float* x, int64_t ld_x, float* y,
                   int64_t ld_y, cudaStream_t stream);
// h[p] = SwiGLU (clamped when limit > 1e-6) of g[p] * gate_scale[e], u[p] * up_scale[e]
// (scales optional, and then `experts` may be null; n_* == 1: one scale for every expert).
void expert_swiglu(const float* g, const float* u, const int32_t* experts, int64_t n_pairs, int64_t n_ff,
                   const float* gate_scale, int64_t n_gs, const float* up_scale, int64_t n_us, float limit, float* h,
                   cudaStream_t stream);
// out[t] = sum over slots j (in order) of d[p] * weights[p] * down_scale[e], p = t*n_used + j.
void expert_combine(const float* d, const int32_t* experts, const float* weights,
                    const float* down_scale, int64_t n_ds, int64_t n_tok, int n_used, int64_t n_embd, float* out,
                    cudaStream_t stream);

// The fused decode path (two launches per layer): whether it reads these
// experts (types with a coalesced dot step, rows of whole 256-element steps,
// aligned rows, 1..16 experts per token, float4-aligned activations).
bool expert_fused_supported(GgmlType gate_type, GgmlType up_type, GgmlType down_type, const void* gate,
                            const void* up, const void* down, size_t gu_matrix_bytes, size_t gu_row_bytes,
                            size_t d_matrix_bytes, size_t d_row_bytes, int64_t n_embd, int64_t n_ff, int n_used,
                            int64_t n_pairs, const float* x, int64_t ld_x);
// h[p] = expert_swiglu of (gate_e . x[p / x_div], up_e . x[p / x_div]), e = experts[p]:
// expert_matvec twice and expert_swiglu in one launch.
void expert_gate_up_swiglu(GgmlType type, const uint8_t* gate, const uint8_t* up, size_t matrix_bytes,
                           size_t row_bytes, int64_t k, int64_t n_ff, const int32_t* experts, int64_t n_pairs,
                           int x_div, const float* x, int64_t ld_x, const float* gate_scale, int64_t n_gs,
                           const float* up_scale, int64_t n_us, float limit, float* h, cudaStream_t stream);
// out[t] = expert_combine of the down products of h[p] (rows of n_ff), p = t * n_used + j.
void expert_down_combine(GgmlType type, const uint8_t* down, size_t matrix_bytes, size_t row_bytes, int64_t n_ff,
                         int64_t n_embd, const int32_t* experts, const float* weights, const float* down_scale,
                         int64_t n_ds, int64_t n_tok, int n_used, const float* h, float* out, cudaStream_t stream);

// ---- moe_grouped.cu: the fused pair grouped by expert, for decode batches ----
// Whether the grouped kernels take n_pairs (token, slot) pairs over n_exp experts.
bool expert_grouped_supported(int64_t n_exp, int64_t n_pairs);
// expert_gate_up_swiglu with each chosen expert read once for all its pairs
// (same types and shapes as expert_fused_supported; bit-identical results).
void expert_gate_up_swiglu_grouped(GgmlType type, const uint8_t* gate, const uint8_t* up, size_t matrix_bytes,
                                   size_t row_bytes, int64_t k, int64_t n_ff, int64_t n_exp, const int32_t* experts,
                                   int64_t n_pairs, int x_div, const float* x, int64_t ld_x, const float* gate_scale,
                                   int64_t n_gs, const float* up_scale, int64_t n_us, float limit, float* h,
                                   cudaStream_t stream);
// d[p] = down_e . h[p] (rows of n_embd), e = experts[p], each chosen expert read
// once for all its pairs; expert_combine then gives expert_down_combine's output.
void expert_down_grouped(GgmlType type, const uint8_t* down, size_t matrix_bytes, size_t row_bytes, int64_t n_ff,
                         int64_t n_embd, int64_t n_exp, const int32_t* experts, int64_t n_pairs, const float* h,
                         float* d, cudaStream_t stream);

// ---- q8_matvec.cu: decode products on int8 activations (q8_dot.cuh) --------------
// Bytes of one quantized activation row of k values (k int8, k / 32 float scales).
int64_t q8_activation_bytes(int64_t k);
// Whether matvec_q8 takes this product (Q4_K, Q6_K, Q8_0 rows of whole
// 256-element super-blocks, aligned; float4-aligned activations; up to
// kMatvecMaxTokens tokens whose quantized rows fit a block's shared memory).
bool matvec_q8_supported(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t k, const float* x, int64_t ld_x,
                         int64_t n_tok);
// matvec with x rounded to 8 bits per block of 32 (q8_dot.cuh states the rule).
void matvec_q8(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t k, int64_t n_rows, const float* x,
               int64_t ld_x, int64_t n_tok, float* y, int64_t ld_y, cudaStream_t stream);
// Row r of x (k values, k % 256 == 0) quantized to out + r * q8_activation_bytes(k).
void quantize_rows_q8(const float* x, int64_t ld_x, int64_t n_rows, int64_t k, int8_t* out, cudaStream_t stream);
// The fused MoE decode pair on quantized activations: which experts it reads
// (as expert_fused_supported, for the q8 types).
bool expert_q8_supported(GgmlType gate_type, GgmlType up_type, GgmlType down_type, const void* gate, const void* up,
                         const void* down, size_t gu_matrix_bytes, size_t gu_row_bytes, size_t d_matrix_bytes,
                         size_t d_row_bytes, int64_t n_embd, int64_t n_ff, int n_used, int64_t n_pairs,
                         const float* x, int64_t ld_x);
// expert_gate_up_swiglu over xq (rows of quantize_rows_q8, one per token).
void expert_gate_up_swiglu_q8(GgmlType type, const uint8_t* gate, const uint8_t* up, size_t matrix_bytes,
                              size_t row_bytes, int64_t k, int64_t n_ff, const int32_t* experts, int64_t n_pairs,
                              int x_div, const int8_t* xq, const float* gate_scale, int64_t n_gs,
                              const float* up_scale, int64_t n_us, float limit, float* h, cudaStream_t stream);
// expert_down_combine over hq (rows of quantize_rows_q8, one per pair).
void expert_down_combine_q8(GgmlType type, const uint8_t* down, size_t matrix_bytes, size_t row_bytes, int64_t n_ff,
                            int64_t n_embd, const int32_t* experts, const float* weights, const float* down_scale,
                            int64_t n_ds, int64_t n_tok, int n_used, const int8_t* hq, float* out,
                            cudaStream_t stream);

// ---- moe_grouped_q8.cu: the int8 pair grouped by expert (expert_grouped_supported) ----
// expert_gate_up_swiglu_q8 with each chosen expert read once for all its pairs.
void expert_gate_up_swiglu_grouped_q8(GgmlType type, const uint8_t* gate, const uint8_t* up, size_t matrix_bytes,
                                      size_t row_bytes, int64_t k, int64_t n_ff, int64_t n_exp,
                                      const int32_t* experts, int64_t n_pairs, int x_div, const int8_t* xq,
                                      const float* gate_scale, int64_t n_gs, const float* up_scale, int64_t n_us,
                                      float limit, float* h, cudaStream_t stream);
// d[p] = down_e . h'[p] over hq (rows of quantize_rows_q8, one per pair); expert_combine then
// gives expert_down_combine_q8's output.
void expert_down_grouped_q8(GgmlType type, const uint8_t* down, size_t matrix_bytes, size_t row_bytes, int64_t n_ff,
                            int64_t n_embd, int64_t n_exp, const int32_t* experts, int64_t n_pairs, const int8_t* hq,
                            float* d, cudaStream_t stream);

// ---- moe_split.cu: the routed-expert decode pair on split activations (split_digits.h) ----
// Bytes of one split activation row of k values (three int8 digit planes, block units, sums of 16).
int64_t split_activation_bytes(int64_t k);
// Row r of x (k values, k % 256 == 0) split to out + r * split_activation_bytes(k).
void quantize_rows_split(const float* x, int64_t ld_x, int64_t n_rows, int64_t k, int8_t* out, cudaStream_t stream);
// Whether the split gate + up takes these experts: Q4_K rows of whole
// 256-value blocks, 16-byte aligned; float4-aligned activations.
bool expert_split_gate_up_supported(GgmlType gate_type, GgmlType up_type, const void* gate, const void* up,
                                    size_t matrix_bytes, size_t row_bytes, int64_t n_embd, int64_t n_pairs,
                                    const float* x, int64_t ld_x);
// Whether the split down + combine takes this down matrix (Q4_K as above, up to 16 slots).
bool expert_split_down_supported(GgmlType type, const void* down, size_t matrix_bytes, size_t row_bytes, int64_t n_ff,
                                 int n_used);
// expert_gate_up_swiglu (Q4_K) over xs (rows of quantize_rows_split, one per token).
void expert_gate_up_swiglu_split(const uint8_t* gate, const uint8_t* up, size_t matrix_bytes, size_t row_bytes,
                                 int64_t k, int64_t n_ff, const int32_t* experts, int64_t n_pairs, int x_div,
                                 const int8_t* xs, const float* gate_scale, int64_t n_gs, const float* up_scale,
                                 int64_t n_us, float limit, float* h, cudaStream_t stream);
// expert_down_combine (Q4_K) over hs (rows of quantize_rows_split, one per pair).
void expert_down_combine_split(const uint8_t* down, size_t matrix_bytes, size_t row_bytes, int64_t n_ff,
                               int64_t n_embd, const int32_t* experts, const float* weights, const float* down_scale,
                               int64_t n_ds, int64_t n_tok, int n_used, const int8_t* hs, float* out,
                               cudaStream_t stream);

// ---- dense_split_mma.cu: decode products of Q4_K / Q6_K rows on the int8 tensor cores, split activations ----
// Whether DS4_CUDA_DENSE_SPLIT leaves the path on (the default; 0: the float matvec kernels).
bool dense_split_enabled();
// Whether matmul_split takes W (Q4_K rows of whole 256-value blocks, 16-byte aligned; Q6_K rows, 2-byte
// aligned, with DS4_CUDA_DENSE_SPLIT_Q6K=1) for n_tok (1-64) tokens of x (float4-aligned rows).
bool dense_split_supported(GgmlType type, int64_t k, const void* w, size_t row_bytes, int64_t n_tok, const float* x,
                           int64_t ld_x);
// y[t][r] = W[r] . x[t] for t < n_tok (<= 64) over xs (rows of quantize_rows_split, one per token).
void matmul_split(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t k, int64_t n_rows, const int8_t* xs,
                  int64_t n_tok, float* y, int64_t ld_y, cudaStream_t stream);
// matmul_split over up to kMaxSplitMatrices matrices of one type and row length (a block's q, k and v) in
// one launch; each output the same bits as its own matmul_split.
constexpr int kMaxSplitMatrices = 4;
struct SplitProduct {
    const uint8_t* w;
    int64_t n_rows;
    float* y;
    int64_t ld_y;
};
void matmuls_split(GgmlType type, size_t row_bytes, int64_t k, const SplitProduct* p, int n, const int8_t* xs,
                   int64_t n_tok, cudaStream_t stream);

// ---- moe_split_mma.cu: routed experts of a decode step on the int8 tensor cores, split activations ----
// Whether expert_products_split_mma reads these matrices: Q4_K or Q6_K rows of whole 256-value blocks,
// 16-byte aligned base and matrix size.
bool expert_mma_supported(GgmlType type, const void* base, size_t matrix_bytes, size_t row_bytes, int64_t k);
// y[p][m * n_rows + r] = W_m,e[r] . x'(p) for every pair p of every tile (e, first row, rows) of `tiles`
// (moe_tile_list; p = pair_of_row[row]) or, without tiles, for every pair p < n_pairs alone (e =
// experts[p]); W_0 from w0, W_1 from w1 when given (gate and up in one launch), matrix e at + e *
// matrix_bytes; x'(p) = split row p / x_div of xs (quantize_rows_split rows of k). Bit for bit the same
// with or without tiles, whatever the batch.
void expert_products_split_mma(GgmlType type, const uint8_t* w0, const uint8_t* w1, size_t matrix_bytes,
                               size_t row_bytes, int64_t k, int64_t n_rows, int64_t n_exp, const int32_t* tiles,
                               int64_t n_tiles, const int32_t* pair_of_row, const int32_t* experts, int64_t n_pairs,
                               int x_div, const int8_t* xs, float* y, int64_t ld_y, cudaStream_t stream);
// hs[p] = the split row (quantize_rows_split) of expert_swiglu of gu[p]'s n_ff gate then n_ff up values.
void expert_swiglu_split(const float* gu, int64_t n_ff, const int32_t* experts, int64_t n_exp, int64_t n_pairs,
                         const float* gate_scale, int64_t n_gs, const float* up_scale, int64_t n_us, float limit,
                         int8_t* hs, cudaStream_t stream);

// ---- elementwise.cu -----------------------------------------------------------
void add(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
void scale(float* x, float s, int64_t n, cudaStream_t stream);
// x[t][i] *= w[n_w == 1 ? 0 : i]
void mul_row(float* x, int64_t rows, int64_t cols, const float* w, int64_t n_w, cudaStream_t stream);
void add_row(float* x, int64_t rows, int64_t cols, const float* b, cudaStream_t stream);
void swiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream);
// dst[i] = src[rows[i]] (rows of `cols` floats), i < n.
void gather_rows(const float* src, int64_t cols, const int32_t* rows, int64_t n, float* dst, cudaStream_t stream);
// dst[rows[i]] = src[i] (rows of `cols` floats), i < n.
void scatter_rows(const float* src, int64_t cols, const int32_t* rows, int64_t n, float* dst, cudaStream_t stream);
// dst[rows[i]] += (weights[i] * s) * src[i], i < n; rows distinct within a call.
void scatter_add_rows(const float* src, int64_t cols, const int32_t* rows, const float* weights, float s, int64_t n,
                      float* dst, cudaStream_t stream);

}  // namespace ds4::cuda

// GLM-5.x's op pack: what its forward pass needs beyond the generic set in
// backend.h and the DeepSeek V4 pack it shares (partial RoPE, per-head
// projections and the lightning indexer's top-k come from Dsv4Ops: DeepSeek
// sparse attention is the same op in both families). Declared here,
// implemented by each backend beside Backend (backend/cpu/cpu_ops_glm_dsa.cpp).
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "models/deepseek4/dsv4_ops.h"

namespace ds4 {

class GlmDsaOps {
public:
    virtual ~GlmDsaOps() = default;

    // Writes row t of `rows` into its sequence slot's cache row
    // (slots[t] * slot_rows + positions[t]); throws when a position or slot
    // falls outside the cache.
    virtual void cache_store(Tensor& cache, const Tensor& rows, const CacheRows& where) = 0;
    // The causal set of each row: its own slot's cache rows for positions
    // [0, positions[t]], in RowSets' contiguous form (cap = slot_rows).
    virtual RowSets plan_causal(const CacheRows& where, int64_t n) = 0;
    // Layer norm over whole rows: (x - mean) / sqrt(var + eps) * weight + bias
    // (weight and bias optional), as ggml_norm followed by the affine part.
    virtual void layer_norm(const Tensor& x, const WeightRef* weight, const WeightRef* bias, float eps,
                            Tensor& y) = 0;
    // Copies columns [offset, offset + width) of each of n_heads heads of
    // head_dim values into dst (rows x n_heads * width).
    virtual void head_columns(const Tensor& src, int n_heads, int head_dim, int offset, int width, Tensor& dst) = 0;
    // Sigmoid-scored routing (DeepSeek V3 / GLM): probs = sigmoid(logits);
    // experts are chosen by top-k of probs + bias (bias optional) inside the
    // n_group_used groups of n_expert / n_groups experts whose two best
    // biased scores sum highest (n_groups <= 1: no groups); weights are the
    // unbiased probs of the chosen experts, optionally normalised (sum
    // clamped to >= 6.1e-5) and scaled (w_scale 0 or 1: unscaled).
    virtual Routing route_sigmoid(const Tensor& logits, const WeightRef* bias, int n_used, int n_groups,
                                  int n_group_used, bool norm, float w_scale) = 0;
    // Multi-head latent attention in the absorbed form: head h of row t
    // scores cache row j as (q_lat[t][h] . latent[j] + q_pe[t][h] . pe[j]) *
    // scale over the rows `rows` lists for t, softmax, and sums latent[j]
    // (the values are the keys' latent part). q_lat: rows x n_head * d_lat,
    // q_pe: rows x n_head * d_pe; latent: cache rows x d_lat, pe: cache rows
    // x d_pe; out: rows x n_head * d_lat.
    virtual void attention_latent(const Tensor& q_lat, const Tensor& q_pe, const Tensor& latent, const Tensor& pe,
                                  const RowSets& rows, int n_head, float scale, Tensor& out) = 0;
};

// The backend's GLM-5 op pack; one sentence when it has none.
inline GlmDsaOps& glm_dsa_ops(Backend& backend) { return backend.op_pack<GlmDsaOps>("GLM-5 (glm-dsa)"); }

}  // namespace ds4

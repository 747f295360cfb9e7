// DeepSeek V4's op pack: the ops its forward pass needs beyond the generic
// set in backend.h (partial RoPE, hyper-connections, grouped projection,
// clamped SwiGLU experts with sqrt-softplus routing, the compressor, the
// lightning indexer and window + compressed attention with sinks). Declared
// here, implemented by each backend beside Backend (backend/cpu/
// cpu_ops_deepseek4.cpp, backend/cuda/cuda_backend_deepseek4.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace ds4 {

// Hyper-connection settings (DeepSeek V4): n_hc residual streams.
struct HcParams {
    int n_hc = 4;
    float eps = 1e-6f;        // added after the sigmoid and inside Sinkhorn
    int sinkhorn_iters = 1;
};

// Per query row, a list of rows of another tensor (CSR layout):
// rows[offsets[t] .. offsets[t + 1]) belong to query row t.
struct RowLists {
    std::vector<int32_t> offsets;  // n_queries + 1
    std::vector<int32_t> rows;
};

class Dsv4Ops {
public:
    virtual ~Dsv4Ops() = default;

    // RoPE on dims [offset, offset + p.n_rot) of each head, adjacent or NeoX
    // pairs; `inverse` rotates back (sin negated), as ggml's rope_back.
    virtual void rope_partial(Tensor& x, int head_dim, int offset, const IntArray& positions, const RopeParams& p,
                              bool inverse) = 0;
    // Hyper-connection mixes [rows x (2 + n_hc) * n_hc] -> pre [rows x n_hc]
    // (sigmoid(m * scale[0] + base) + eps), and when given, post (2 sigmoid
    // with scale[1]) and comb [rows x n_hc * n_hc], comb[dst + n_hc * src],
    // Sinkhorn-normalised (softmax over dst, then column/row sweeps).
    virtual void hc_mixes(const Tensor& mixes, const WeightRef& scale, const WeightRef& base, const HcParams& p,
                          Tensor& pre, Tensor* post, Tensor* comb) = 0;
    // out[t] = sum_h pre[t][h] * x[t][stream h]      (x: rows x n_hc*n_embd)
    virtual void hc_collapse(const Tensor& x, const Tensor& pre, Tensor& out) = 0;
    // out[t][dst] = post[t][dst] * y[t] + sum_src comb[t][dst + n_hc*src] * res[t][src]
    virtual void hc_expand(const Tensor& y, const Tensor& residual, const Tensor& post, const Tensor& comb,
                           Tensor& out) = 0;
    // Grouped projection with a 3-D weight [k x r x G]: for each group g,
    // y[t][g*r + i] = sum_j W_g[i][j] x[t][g*k + j].
    virtual void matmul_grouped(const WeightRef& w, const Tensor& x, Tensor& y) = 0;
    // silu(min(gate, limit)) * clamp(up, -limit, limit); limit <= 1e-6: plain SwiGLU.
    virtual void swiglu_clamp(const Tensor& gate, const Tensor& up, float limit, Tensor& out) = 0;
    // sqrt(softplus(logits)) scoring; experts chosen by top-k of score + bias
    // (bias optional), or given per row in `forced` ([rows x n_used], hash
    // routing). Weights are the unbiased scores of the chosen experts,
    // optionally normalised (sum clamped to >= 6.1e-5) and scaled.
    virtual Routing route_sqrt_softplus(const Tensor& logits, const WeightRef* bias, const int32_t* forced, int n_used,
                                        bool norm, float w_scale) = 0;
    // moe_swiglu with the clamped SwiGLU above.
    virtual void moe_swiglu_clamp(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                                  const WeightRef& down, float limit, Tensor& out) = 0;
    // Compressor pooling: each output row pools `per_block` source rows with
    // a per-channel softmax of their scores. Source row ids index the
    // concatenation [state rows | chunk rows]; -1 is an empty source (value 0,
    // score -inf). With `overlap`, the first half of each block's sources
    // use columns [0, D) and the second half [D, 2D) (D = out.cols).
    virtual void compress_pool(const Tensor& state_kv, const Tensor& state_score, const Tensor& kv,
                               const Tensor& score, const int32_t* sources, int per_block, bool overlap,
                               Tensor& out) = 0;
    // dst[dst_rows[i]] = src[src_rows[i]] for i < n.
    virtual void copy_rows(const Tensor& src, const int32_t* src_rows, Tensor& dst, const int32_t* dst_rows,
                           int64_t n) = 0;
    // Lightning indexer: for query row t, score of key row j < n_visible[t]
    // is sum_h w[t][h] * relu(q[t][head h] . keys[j]); returns the top_k
    // best rows per query (all visible rows when there are no more than top_k).
    virtual RowLists indexer_topk(const Tensor& q, const Tensor& w, const Tensor& keys, const int32_t* n_visible,
                                  int64_t top_k) = 0;
    // Multi-query attention with one shared key=value head of q-head size:
    // query t (position pos0 + t) attends to the sliding window of n_swa
    // positions ending at itself (earlier chunk rows from `window`, a ring
    // indexed by position % n_swa; rows of this chunk from `k`) and to the
    // compressed rows comp_rows lists for it; a per-head sink logit joins
    // the softmax denominator.
    virtual void attention_window_sink(const Tensor& q, const Tensor& k, const Tensor& window, int64_t pos0,
                                       int64_t n_swa, const Tensor* comp, const RowLists* comp_rows,
                                       const WeightRef& sinks, const AttentionParams& p, Tensor& out) = 0;

};

// The backend's DeepSeek V4 op pack; one sentence when it has none.
inline Dsv4Ops& dsv4_ops(Backend& backend) { return backend.op_pack<Dsv4Ops>("DeepSeek V4"); }

}  // namespace ds4

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

// Where each row of a batch sits, in backend memory, so ops serving the
// rows of many sequences at once read it on the device (and a recorded
// decode step reads the new step's values at every replay). A run is the
// consecutive positions of one sequence inside the batch.
struct Dsv4Rows {
    int64_t n = 0;
    IntArray positions;  // [n] the batch's
    IntArray slots;      // [n] the batch's sequence slots
    IntArray run_first;  // [n] position of the first row of row t's run
    IntArray run_last;   // [n] position of the last row of row t's run
};

// Per query row t, a set of rows of another tensor, ascending: with `rows`,
// count[t] ids at rows[t * cap ...]; without, the contiguous ids
// base[t] .. base[t] + count[t] (cap then bounds every count).
struct RowSets {
    IntArray count;  // [n]
    IntArray base;   // [n] contiguous form
    IntArray rows;   // [n x cap] explicit form
    int64_t cap = 0;
    // Row j of query t's set, read where the arrays are host memory (the
    // CPU backend; CUDA kernels index them the same way on the device).
    int64_t at(int64_t t, int64_t j) const { return rows.data ? rows.data[t * cap + j] : int64_t(base.data[t]) + j; }
};

// The index lists one compressor ratio needs for a batch (plan_compressor):
// the state holds, per sequence slot, `ring` rows of the compressor ring
// and `cache_rows` compressed rows; slot s owns rows [s * ring, (s + 1) * ring)
// and [s * cache_rows, (s + 1) * cache_rows).
struct Dsv4CompressorPlan {
    int ratio = 0;
    bool overlap = false;
    int64_t ring = 0, cache_rows = 0;
    int per_block() const { return overlap ? 2 * ratio : ratio; }
    IntArray in_block;   // [n] position % ratio: the row of the position bias
    // [n x per_block] pooling sources of the block ending at row t, ids into
    // [batch rows | ring rows of every slot]; -1 an empty source (before
    // position 0); all -1 when no block ends at row t.
    IntArray sources;
    IntArray block_pos;  // [n] first position of that block (0 when none)
    IntArray cache_dst;  // [n] compressed row it becomes, or -1
    IntArray ring_dst;   // [n] ring row kept for later blocks (the newest `ring` of each run), or -1
    RowSets visible;     // contiguous: the completed blocks row t may attend to
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
    // (bias optional), or, for hash routing, read from the i32 table
    // `hash` ([n_vocab x n_used], ids checked when the model loads) at the
    // row of each row's token. Weights are the unbiased scores of the chosen
    // experts, optionally normalised (sum clamped to >= 6.1e-5) and scaled.
    virtual Routing route_sqrt_softplus(const Tensor& logits, const WeightRef* bias, const WeightRef* hash,
                                        const IntArray* tokens, int n_used, bool norm, float w_scale) = 0;
    // moe_swiglu with the clamped SwiGLU above.
    virtual void moe_swiglu_clamp(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                                  const WeightRef& down, float limit, Tensor& out) = 0;
    // streams[t][h * E + i] = x[t][i] for each of the streams.cols / E streams.
    virtual void broadcast_streams(const Tensor& x, Tensor& streams) = 0;

    // ---- index plans: computed from the batch's arrays in backend memory ----
    // The runs of the batch's rows (rows of a run are consecutive positions
    // of one slot, adjacent in the batch).
    virtual Dsv4Rows plan_rows(const CacheRows& batch, int64_t n) = 0;
    // dst[t] = slot * ring + position % ring for the newest `ring` rows of
    // each run, -1 for the others (a ring keeps the last `ring` positions).
    virtual IntArray plan_ring(const Dsv4Rows& rows, int64_t ring) = 0;
    // Everything one compressor ratio needs (Dsv4CompressorPlan).
    virtual Dsv4CompressorPlan plan_compressor(const Dsv4Rows& rows, int ratio, bool overlap, int64_t cache_rows) = 0;

    // Compressor pooling: out row t pools the per_block sources listed for
    // it with a per-channel softmax of their scores (sources as in
    // Dsv4CompressorPlan: ids into [kv rows | state rows]; -1: value 0,
    // score -inf).
    // With `overlap`, the first half of the sources use columns [0, D) and
    // the second half [D, 2D) (D = out.cols). A row without any source is 0.
    virtual void compress_pool(const Tensor& state_kv, const Tensor& state_score, const Tensor& kv,
                               const Tensor& score, const IntArray& sources, int per_block, bool overlap,
                               Tensor& out) = 0;
    // dst[dst_rows[i]] = src[i] for i < src.rows; -1 skips a row. The
    // destinations must be distinct.
    virtual void scatter_rows(const Tensor& src, const IntArray& dst_rows, Tensor& dst) = 0;
    // Lightning indexer: for query row t, score of each key row j in
    // visible[t] is sum_h w[t][h] * relu(q[t][head h] . keys[j]); returns
    // the top_k best rows of each set, ascending (all of a set of no more
    // than top_k), in the explicit RowSets form with cap = top_k.
    virtual RowSets indexer_topk(const Tensor& q, const Tensor& w, const Tensor& keys, const RowSets& visible,
                                 int64_t top_k) = 0;
    // Multi-query attention with one shared key=value head of q-head size:
    // row t (position p, slot s) attends to the sliding window of n_swa
    // positions ending at p (positions of its own run from the batch rows
    // of `k`, earlier ones from `window`, a ring of n_swa rows per slot
    // addressed s * n_swa + position % n_swa) and to the compressed rows
    // comp_rows lists for it; a per-head sink logit joins the softmax
    // denominator.
    virtual void attention_window_sink(const Tensor& q, const Tensor& k, const Tensor& window, const Dsv4Rows& rows,
                                       int64_t n_swa, const Tensor* comp, const RowSets* comp_rows,
                                       const WeightRef& sinks, const AttentionParams& p, Tensor& out) = 0;
};

// Plans in `be`'s memory for n rows, their arrays allocated and not yet
// filled: what the plan ops of every backend start from.
inline Dsv4Rows new_rows_plan(Backend& be, const CacheRows& batch, int64_t n) {
    Dsv4Rows r;
    r.n = n;
    r.positions = batch.positions;
    r.slots = batch.slots;
    r.run_first = be.alloc_ints(n);
    r.run_last = be.alloc_ints(n);
    return r;
}
inline Dsv4CompressorPlan new_compressor_plan(Backend& be, int64_t n, int ratio, bool overlap, int64_t cache_rows) {
    Dsv4CompressorPlan c;
    c.ratio = ratio;
    c.overlap = overlap;
    c.ring = (overlap ? 2 : 1) * int64_t(ratio);
    c.cache_rows = cache_rows;
    c.in_block = be.alloc_ints(n);
    c.sources = be.alloc_ints(n * c.per_block());
    c.block_pos = be.alloc_ints(n);
    c.cache_dst = be.alloc_ints(n);
    c.visible.count = be.alloc_ints(n);
    c.visible.base = be.alloc_ints(n);
    c.visible.cap = cache_rows;
    return c;
}

// The backend's DeepSeek V4 op pack; one sentence when it has none.
inline Dsv4Ops& dsv4_ops(Backend& backend) { return backend.op_pack<Dsv4Ops>("DeepSeek V4"); }

}  // namespace ds4

// The CPU backend: the reference implementation of the op set. Readable
// first; parallel over output rows / heads with a thread pool.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "models/deepseek4/dsv4_ops.h"
#include "models/glm_dsa/glm_dsa_ops.h"
#include "backend/cpu/thread_pool.h"

namespace ds4 {

class CpuBackend final : public Backend, public Dsv4Ops, public GlmDsaOps {
public:
    explicit CpuBackend(int n_threads) : pool_(n_threads) {}
    std::string name() const override { return "cpu"; }
    uint64_t available_memory() const override;
    bool reads_attached_buffers_in_place() const override { return true; }
    bool computes_experts_as_they_arrive() const override { return true; }
    uint64_t expert_window_bytes(uint64_t bytes) const override;

    Tensor alloc(int64_t rows, int64_t cols) override;
    void upload(Tensor& t, const float* host) override;
    void download(const Tensor& t, float* host) override;
    IntArray alloc_ints(int64_t n) override;
    void upload_ints(IntArray& a, const int32_t* host) override;
    void download_ints(const IntArray& a, int32_t* host) override;

    void get_rows(const WeightRef& table, const IntArray& ids, Tensor& out) override;
    void matmul(const WeightRef& w, const Tensor& x, Tensor& y, int64_t matrix = 0) override;
    void rms_norm(const Tensor& x, const WeightRef* weight, float eps, int64_t group, Tensor& y) override;
    void rope(Tensor& x, int head_dim, const IntArray& positions, const RopeParams& p) override;
    void kv_store(Tensor& k_cache, Tensor& v_cache, const Tensor& k, const Tensor& v, const CacheRows& rows) override;
    void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const CacheRows& rows,
                   const AttentionParams& p, Tensor& out) override;
    void gather_rows(const Tensor& src, const IntArray& rows, Tensor& dst) override;
    void top_k_rows(const Tensor& x, int k, Tensor& values, IntArray& ids, IntArray& first_bad) override;
    void copy(const Tensor& src, Tensor& dst) override;
    void add(const Tensor& a, const Tensor& b, Tensor& out) override;
    void scale(Tensor& x, float s) override;
    void mul_row(Tensor& x, const WeightRef& w) override;
    void add_row(Tensor& x, const WeightRef& b) override;
    void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) override;
    Routing route_softmax_topk(const Tensor& logits, int n_used, bool norm, float w_scale) override;
    void moe_swiglu(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                    const WeightRef& down, const WeightRef* gate_scale, const WeightRef* up_scale,
                    const WeightRef* down_scale, Tensor& out) override;

    // DeepSeek V4 ops (cpu_ops_deepseek4.cpp).
    void rope_partial(Tensor& x, int head_dim, int offset, const IntArray& positions, const RopeParams& p,
                      bool inverse) override;
    void hc_mixes(const Tensor& mixes, const WeightRef& scale, const WeightRef& base, const HcParams& p, Tensor& pre,
                  Tensor* post, Tensor* comb) override;
    void hc_collapse(const Tensor& x, const Tensor& pre, Tensor& out) override;
    void hc_expand(const Tensor& y, const Tensor& residual, const Tensor& post, const Tensor& comb,
                   Tensor& out) override;
    void matmul_grouped(const WeightRef& w, const Tensor& x, Tensor& y) override;
    void swiglu_clamp(const Tensor& gate, const Tensor& up, float limit, Tensor& out) override;
    Routing route_sqrt_softplus(const Tensor& logits, const WeightRef* bias, const WeightRef* hash,
                                const IntArray* tokens, int n_used, bool norm, float w_scale) override;
    void moe_swiglu_clamp(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                          const WeightRef& down, float limit, Tensor& out) override;
    void broadcast_streams(const Tensor& x, Tensor& streams) override;
    Dsv4Rows plan_rows(const CacheRows& batch, int64_t n) override;           // cpu_dsv4_plans.cpp
    IntArray plan_ring(const Dsv4Rows& rows, int64_t ring) override;
    Dsv4CompressorPlan plan_compressor(const Dsv4Rows& rows, int ratio, bool overlap, int64_t cache_rows) override;
    void compress_pool(const Tensor& state_kv, const Tensor& state_score, const Tensor& kv, const Tensor& score,
                       const IntArray& sources, int per_block, bool overlap, Tensor& out) override;
    void scatter_rows(const Tensor& src, const IntArray& dst_rows, Tensor& dst) override;
    RowSets indexer_topk(const Tensor& q, const Tensor& w, const Tensor& keys, const RowSets& visible,
                         int64_t top_k) override;
    void attention_window_sink(const Tensor& q, const Tensor& k, const Tensor& window, const Dsv4Rows& rows,
                               int64_t n_swa, const Tensor* comp, const RowSets* comp_rows, const WeightRef& sinks,
                               const AttentionParams& p, Tensor& out) override;

    // GLM-5 ops (cpu_ops_glm_dsa.cpp).
    void cache_store(Tensor& cache, const Tensor& rows, const CacheRows& where) override;
    RowSets plan_causal(const CacheRows& where, int64_t n) override;
    void layer_norm(const Tensor& x, const WeightRef* weight, const WeightRef* bias, float eps, Tensor& y) override;
    void head_columns(const Tensor& src, int n_heads, int head_dim, int offset, int width, Tensor& dst) override;
    Routing route_sigmoid(const Tensor& logits, const WeightRef* bias, int n_used, int n_groups, int n_group_used,
                          bool norm, float w_scale) override;
    void attention_latent(const Tensor& q_lat, const Tensor& q_pe, const Tensor& latent, const Tensor& pe,
                          const RowSets& rows, int n_head, float scale, Tensor& out) override;

    ThreadPool& pool() { return pool_; }

    // How near each top-k choice of a forward pass came to another set, for
    // tests that hold another engine to this one: while `margins` is set,
    // every routing and indexer choice for batch row t lowers (*margins)[t]
    // (grown to the pass's rows with +inf) to (k-th - (k+1)-th score) /
    // max |score| of that choice. Two correct float engines summing in
    // different orders disagree in the last bits of every score; where a
    // margin is ~1e-6 either set is right, and the logits of that row then
    // differ by ~1e-2. Such a test redraws that input instead of loosening
    // its bound (tests/support/clear_choices.h).
    void watch_selection_margins(std::vector<double>* margins) { margins_ = margins; }

protected:
    // Windows over shared memory (cpu_expert_windows.cpp), for the windows'
    // source's tests: the CPU's two tiers are the same RAM.
    std::unique_ptr<ExpertWindows> make_expert_windows(int64_t n, uint64_t bytes, int64_t device_slots) override;

private:
    // Grows the watched margins to `rows` (before a parallel loop writes them).
    void prepare_margins(int64_t rows);
    // Records the choice of the k best of score[order[0..n)], whose first k
    // entries are the choice with the k-th at order[k - 1].
    void note_selection(int64_t row, const float* score, const int32_t* order, int64_t n, int64_t k);

    // The routed-expert FFN of both families: SwiGLU (clamped when
    // limit > 1e-6) with optional per-expert scales; each token's expert
    // outputs are summed in slot order, as llama.cpp's build_moe_ffn does.
    void moe_ffn(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                 const WeightRef& down, const WeightRef* gate_scale, const WeightRef* up_scale,
                 const WeightRef* down_scale, float limit, Tensor& out);

    ThreadPool pool_;
    std::vector<double>* margins_ = nullptr;
};

}  // namespace ds4

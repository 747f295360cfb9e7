// The op set a model family's forward pass is written in. Families never
// touch activation memory directly: they ask the backend for tensors and run
// ops on them, so the same forward code runs on the CPU and on CUDA.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"

namespace ds4 {

class ModelMap;

// A weight inside a mapped region: ggml layout, ne[0] is the row length;
// 3-D tensors hold one [ne0 x ne1] matrix per expert.
struct WeightRef {
    GgmlType type = GgmlType::F32;
    const uint8_t* data = nullptr;
    int64_t ne[4] = {1, 1, 1, 1};
    size_t row_bytes = 0;     // bytes of one row of ne[0] elements
    size_t matrix_bytes = 0;  // bytes of one ne[0] x ne[1] matrix (expert stride)
    uint64_t offset = 0;      // absolute file offset of the tensor's bytes, so a weight
                              // source can read what the model map does not hold
    std::string name;

    explicit operator bool() const { return data != nullptr; }
    int64_t rows() const { return ne[1]; }
    int64_t cols() const { return ne[0]; }
};

// Activations: float32, `rows` rows (usually tokens) of `cols` values,
// row-major and contiguous. Memory belongs to the backend that made it.
struct Tensor {
    float* data = nullptr;
    int64_t rows = 0;
    int64_t cols = 0;
    std::shared_ptr<void> owner;
    int64_t size() const { return rows * cols; }
    // Rows [r0, r0 + n) as a tensor sharing this one's memory (no copy).
    Tensor row_view(int64_t r0, int64_t n) const {
        Tensor v = *this;
        v.data = data + r0 * cols;
        v.rows = n;
        return v;
    }
    // The same values seen as `new_rows` rows (rows * cols must not change).
    Tensor reshaped(int64_t new_rows, int64_t new_cols) const {
        Tensor v = *this;
        v.rows = new_rows;
        v.cols = new_cols;
        return v;
    }
};

// Integers an op reads (token ids, positions, chosen experts), in the
// backend's memory like a Tensor's values: on CUDA they live on the device,
// so a captured decode step reads the new step's ids and positions from the
// same place at every replay.
struct IntArray {
    int32_t* data = nullptr;
    int64_t n = 0;
    std::shared_ptr<void> owner;
};

// Where the rows of a step live in a key/value cache shared by sequence
// slots: row t belongs to slot slots[t], which owns cache rows
// [slots[t] * slot_rows, (slots[t] + 1) * slot_rows), and sits at position
// positions[t] of that sequence. Ids live in backend memory, so a recorded
// step reads the new step's slots and positions at every replay.
struct CacheRows {
    IntArray positions;
    IntArray slots;
    int64_t slot_rows = 0;
    // The most rows one sequence has in this batch, known on the host when
    // the batch is built (1: a decode step; 0: not known). A backend may
    // pick its attention kernel by it: many query rows of one sequence share
    // its keys, one row each do not.
    int64_t max_seq_rows = 0;
};

struct RopeParams {
    int n_rot = 0;            // rotated dimensions per head (<= head_dim)
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;  // 1 / linear scaling factor
    float ext_factor = 0.0f;  // YaRN extrapolation mix (0: plain scaling)
    float attn_factor = 1.0f;
    float beta_fast = 32.0f;
    float beta_slow = 1.0f;
    int n_ctx_orig = 0;
    bool neox = true;         // NeoX pairing (i, i + n_rot/2); else adjacent pairs
};

struct AttentionParams {
    int n_head = 0;
    int n_head_kv = 0;
    int head_dim_k = 0;
    int head_dim_v = 0;
    float scale = 1.0f;
};

// Experts whose matrices are still being read when the MoE op starts: a
// weight source that reads its misses in the background (the CPU's expert
// cache) hands this to the op with the routing, so the op computes the
// experts it already holds first and waits only before the others.
class ExpertArrival {
public:
    virtual ~ExpertArrival() = default;
    // Whether matrix `m` (an index the routing holds) is still on its way.
    virtual bool pending(int32_t m) const = 0;
    // Returns once every pending matrix has arrived. Throws ds4::Error (the
    // read's sentence) when one could not be read: the step fails, never
    // computes with partial bytes.
    virtual void wait() = 0;
};

// Per-token MoE routing results in backend memory: n_used experts and their
// weights for each of `rows` tokens (download_ints / download to inspect).
struct Routing {
    int n_used = 0;
    int64_t rows = 0;
    IntArray experts;  // [rows x n_used]
    Tensor weights;    // [rows x n_used]
    // Set by the weight source when some experts are still being read; only
    // on a backend whose MoE ops say they wait for it
    // (Backend::computes_experts_as_they_arrive).
    std::shared_ptr<ExpertArrival> arrival;
};

// Fixed windows of the address space the ops read weights from, one per
// routed expert (experts/expert_windows.h): window w spans
// [base() + w * stride(), + stride()) and a WeightRef may point into it.
// Each window is backed by host memory (on CUDA page-locked and mapped into
// the device's address space, so a kernel reads it over the host link) or,
// once promoted, by one of device_slots() slots of device memory mapped at
// the same addresses. Kernels, and recorded steps, compute the same
// addresses whichever backs a window; only what they read from changes.
class ExpertWindows {
public:
    virtual ~ExpertWindows() = default;
    uint8_t* base() const { return base_; }
    uint64_t stride() const { return stride_; }
    int64_t size() const { return n_; }
    int64_t device_slots() const { return slots_; }
    // Writes `bytes` from host memory `src` into window w's host memory at
    // `offset`, before any op that reads them is issued (a source fills its
    // windows once, at start). The copy may still run when this returns:
    // `src` must stay unchanged until the backend synchronizes.
    virtual void write(int64_t w, uint64_t offset, const uint8_t* src, uint64_t bytes) = 0;
    // The backing changes, between steps only: every op issued before must
    // have finished (the caller synchronizes) and none may run meanwhile.
    // Demoted windows are read from their host memory again, which freed
    // their slots; each promoted (window, slot) pair gets a copy of the
    // window's bytes in that slot, mapped at the window.
    virtual void rebind(const std::vector<int64_t>& demote,
                        const std::vector<std::pair<int64_t, int64_t>>& promote) = 0;

protected:
    uint8_t* base_ = nullptr;
    uint64_t stride_ = 0;
    int64_t n_ = 0;
    int64_t slots_ = 0;
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;
    // Bytes the backend could still allocate for weights and caches: the
    // device's free memory, or the host's available memory on the CPU.
    virtual uint64_t available_memory() const = 0;

    // Makes the model map's regions resident where the ops read them: one
    // device allocation per region on CUDA (WeightRef host pointers are then
    // translated into it); nothing to do on the CPU, which reads the mapping.
    virtual void attach_weights(const ModelMap& /*map*/) {}
    // Host memory a weight source fills while the model runs (an expert
    // cache's slots): the ops read weights inside it as they read a map
    // region (on CUDA a device copy, or the registered pages with
    // host-registered weights). Written only through write_weights.
    virtual void attach_buffer(const uint8_t* /*host*/, uint64_t /*bytes*/) {}
    // Copies `bytes` from host memory `src` into an attached buffer at host
    // address `dst`, after every op already issued has read the old bytes
    // and before any op issued later reads them. `src` may be released when
    // this returns.
    virtual void write_weights(uint8_t* dst, const uint8_t* src, uint64_t bytes) { std::memcpy(dst, src, bytes); }
    // True when the ops read attached buffers where they lie in host memory
    // and have finished when they return (the CPU): a source may then read
    // the file straight into its buffers instead of through write_weights.
    virtual bool reads_attached_buffers_in_place() const { return false; }
    // True when every MoE op honours Routing::arrival: it computes the
    // experts that are not pending first and calls wait() before it reads
    // the others (the CPU). A weight source then lets the reads of a step's
    // misses run while the step computes.
    virtual bool computes_experts_as_they_arrive() const { return false; }
    // Host memory write_weights copies from fastest (page-locked on CUDA),
    // for a weight source's staging and host tier; null where plain memory
    // is as good (the CPU) or none can be had. Freed with free_host_staging.
    virtual uint8_t* alloc_host_staging(uint64_t /*bytes*/) { return nullptr; }
    virtual void free_host_staging(uint8_t* /*p*/) {}
    // n windows of at least `bytes` each (rounded up to the backend's
    // mapping granularity) with `device_slots` slots of device memory
    // behind them; null where the backend has none to give (then a source
    // keeps its experts in slots of its own). Throws ds4::Error (one
    // sentence) for n < 1 or slots outside [0, n], and when the memory
    // cannot be had.
    std::unique_ptr<ExpertWindows> expert_windows(int64_t n, uint64_t bytes, int64_t device_slots);
    // What one window of `bytes` takes (expert_windows' rounding).
    virtual uint64_t expert_window_bytes(uint64_t bytes) const { return bytes; }

    virtual Tensor alloc(int64_t rows, int64_t cols) = 0;
    // Copies between host memory and a tensor (no-ops in spirit on the CPU).
    virtual void upload(Tensor& t, const float* host) = 0;
    virtual void download(const Tensor& t, float* host) = 0;
    // Waits until every operation issued so far has finished (CUDA: the
    // stream), so another thread may read their results with
    // download_aside.
    virtual void synchronize() {}
    // A download that another thread runs while this backend's own thread
    // goes on computing (CUDA: on a copy stream of its own). `t` must be
    // complete (synchronize) and must not be written or freed until it
    // returns. Only downloads are thread-safe this way.
    virtual void download_aside(const Tensor& t, float* host) { download(t, host); }
    // Copies between page-locked host memory (alloc_host_staging) and a
    // tensor's memory that may be part of a recorded step (CUDA: async copies
    // on the step's stream, nodes of the graph), so a replayed step brings its
    // inputs in and its outputs out with no upload or download of its own.
    // The host bytes must stay unchanged (in) or unread (out) until
    // synchronize(). The CPU: plain copies, at once.
    virtual void copy_in(void* dst, const void* staged, uint64_t bytes) { std::memcpy(dst, staged, bytes); }
    virtual void copy_out(void* staged, const void* src, uint64_t bytes) { std::memcpy(staged, src, bytes); }
    virtual IntArray alloc_ints(int64_t n) = 0;
    virtual void upload_ints(IntArray& a, const int32_t* host) = 0;
    virtual void download_ints(const IntArray& a, int32_t* host) = 0;
    IntArray ints(const int32_t* host, int64_t n) {
        IntArray a = alloc_ints(n);
        upload_ints(a, host);
        return a;
    }

    // ---- decode-step capture ------------------------------------------
    // A backend that can record the ops of one forward pass and replay them
    // with a single launch (CUDA graphs) says so here. Between begin_capture
    // and end_capture nothing runs: ops are recorded with the memory they
    // were given, and tensors allocated meanwhile belong to the recording
    // (they keep their addresses at every replay and die with it). Only
    // forward passes whose host-side decisions do not depend on the step's
    // values may be recorded (Model::replayable_decode).
    virtual bool can_capture() const { return false; }
    virtual void begin_capture() {}
    virtual std::shared_ptr<void> end_capture() { return nullptr; }
    virtual void replay(const std::shared_ptr<void>& /*recording*/) {}

    // out[i] = table row ids[i], dequantized. Ids are checked by the caller
    // (the session checks token ids against the vocabulary).
    virtual void get_rows(const WeightRef& table, const IntArray& ids, Tensor& out) = 0;
    // y[t][r] = sum_k W[r][k] x[t][k]   (W: ne[0] = k columns, ne[1] rows).
    // For a 3-D weight, `matrix` picks the expert matrix.
    virtual void matmul(const WeightRef& w, const Tensor& x, Tensor& y, int64_t matrix = 0) = 0;
    // A hint with no effect on results: the n weights are read soon (an op
    // or two later), so a backend may bring them nearer meanwhile (CUDA: into
    // L2 on a side branch of a recorded step, cuda/l2_ahead.h).
    virtual void prefetch(const WeightRef* const* /*w*/, int /*n*/) {}
    // y[i] = matmul(*w[i], x) for i < n: several products of one input (a
    // block's q, k and v), which a backend may prepare once for all of them.
    virtual void matmuls(const Tensor& x, const WeightRef* const* w, Tensor* const* y, int n) {
        for (int i = 0; i < n; ++i) matmul(*w[i], x, *y[i]);
    }
    // RMS norm over groups of `group` values (group = cols for a whole row,
    // head_dim for per-head norms), times weight (length group) if given.
    virtual void rms_norm(const Tensor& x, const WeightRef* weight, float eps, int64_t group, Tensor& y) = 0;
    // Rotates each head of row t of x (cols = n_heads * head_dim) at positions[t].
    virtual void rope(Tensor& x, int head_dim, const IntArray& positions, const RopeParams& p) = 0;
    // Writes k/v row t into its slot's cache row positions[t] (the caller
    // checks that the slots and positions fit the cache).
    virtual void kv_store(Tensor& k_cache, Tensor& v_cache, const Tensor& k, const Tensor& v,
                          const CacheRows& rows) = 0;
    // Causal attention: q row t attends to its own slot's cache rows
    // [0, positions[t]], so one call serves rows of many sequences.
    virtual void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const CacheRows& rows,
                           const AttentionParams& p, Tensor& out) = 0;
    // dst row i = src row rows[i] (e.g. each sequence's last row, for logits).
    virtual void gather_rows(const Tensor& src, const IntArray& rows, Tensor& dst) = 0;
    // The k best values of each row of x, best first, equal values by lower
    // column (the sampler's order; -0 equals +0), 1 <= k <= min(x.cols,
    // kMaxTopK): values [x.rows x k] and their columns ids [x.rows * k].
    // first_bad[t] is the lowest column of row t holding NaN or +infinity,
    // or -1; such a row's candidates mean nothing. What a sampler needs of a
    // row of logits, without the row leaving the backend.
    static constexpr int kMaxTopK = 128;
    virtual void top_k_rows(const Tensor& x, int k, Tensor& values, IntArray& ids, IntArray& first_bad) = 0;
    // dst = src (same shape), e.g. a stage's hidden input into its residual stream.
    virtual void copy(const Tensor& src, Tensor& dst) = 0;
    virtual void add(const Tensor& a, const Tensor& b, Tensor& out) = 0;       // out = a + b

    // ---- fused sequences: each is exactly the ops it names, in order; the
    // defaults run them one by one (the reference), a backend may run them
    // in one pass (CUDA: fewer launches per decode layer).
    // x += delta, then y = rms_norm(x) * weight over whole rows (the residual
    // add of a block and the next norm).
    virtual void add_rms_norm(Tensor& x, const Tensor& delta, const WeightRef* weight, float eps, Tensor& y) {
        add(x, delta, x);
        rms_norm(x, weight, eps, x.cols, y);
    }
    // Per-head RMS norm of q and k (weights of head_dim values), then RoPE
    // of both at positions[t] (qwen3moe's attention input).
    virtual void qk_norm_rope(Tensor& q, Tensor& k, const WeightRef& q_norm, const WeightRef& k_norm, float eps,
                              int head_dim, const IntArray& positions, const RopeParams& p) {
        rms_norm(q, &q_norm, eps, head_dim, q);
        rms_norm(k, &k_norm, eps, head_dim, k);
        rope(q, head_dim, positions, p);
        rope(k, head_dim, positions, p);
    }
    // qk_norm_rope at rows.positions, then kv_store of the rotated k and of v
    // (qwen3moe's attention input and its cache rows).
    virtual void qk_norm_rope_store(Tensor& q, Tensor& k, const Tensor& v, const WeightRef& q_norm,
                                    const WeightRef& k_norm, float eps, int head_dim, const RopeParams& p,
                                    Tensor& k_cache, Tensor& v_cache, const CacheRows& rows) {
        qk_norm_rope(q, k, q_norm, k_norm, eps, head_dim, rows.positions, p);
        kv_store(k_cache, v_cache, k, v, rows);
    }
    virtual void scale(Tensor& x, float s) = 0;                                  // x *= s
    virtual void mul_row(Tensor& x, const WeightRef& w) = 0;                     // x[t][i] *= w[i] (or w[0] if 1 element)
    virtual void add_row(Tensor& x, const WeightRef& b) = 0;                     // x[t][i] += b[i]
    virtual void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) = 0;  // silu(gate) * up
    // Softmax-gated top-k routing (ties: lower expert id first), optional
    // renormalisation of the chosen weights and a final scale.
    // counts[e] += how many (row, slot) pairs of `routing` chose expert e,
    // for e < counts.n (a weight source's routing statistics, kept in
    // backend memory so a recorded step keeps them too). The default reads
    // the routing back; backends that record steps do it on their side.
    virtual void count_experts(const Routing& routing, IntArray& counts);
    virtual Routing route_softmax_topk(const Tensor& logits, int n_used, bool norm, float w_scale) = 0;
    // logits = matmul(router, x), then route_softmax_topk of them (a MoE
    // block's router and its choice).
    virtual Routing router_softmax_topk(const WeightRef& router, const Tensor& x, Tensor& logits, int n_used, bool norm,
                                        float w_scale) {
        matmul(router, x, logits);
        return route_softmax_topk(logits, n_used, norm, w_scale);
    }
    // out[t] = sum_j routing.weights[t][j] * FFN_expert(routing.experts[t][j])(x[t])
    // with SwiGLU experts gate/up/down (3-D weights); optional per-expert scales.
    virtual void moe_swiglu(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                            const WeightRef& down, const WeightRef* gate_scale, const WeightRef* up_scale,
                            const WeightRef* down_scale, Tensor& out) = 0;

    // ---- op packs ---------------------------------------------------------
    // A family whose forward needs ops of its own declares them as an op
    // pack (an interface in its model folder) that backends implement beside
    // this one; the family asks for it by type. Throws ds4::Error with one
    // sentence when this backend lacks the pack.
    template <class Pack>
    Pack& op_pack(const char* family) {
        if (auto* p = dynamic_cast<Pack*>(this)) return *p;
        throw_missing_pack(family);
    }

protected:
    // expert_windows' backend part, its arguments checked.
    virtual std::unique_ptr<ExpertWindows> make_expert_windows(int64_t /*n*/, uint64_t /*bytes*/,
                                                               int64_t /*device_slots*/) {
        return nullptr;
    }
    [[noreturn]] void throw_missing_pack(const char* family) const;
    // Throws one sentence when top_k_rows' k or output shapes do not fit x.
    static void check_top_k_shapes(const Tensor& x, int k, const Tensor& values, const IntArray& ids,
                                   const IntArray& first_bad);
    // Empty routing results in this backend's memory, for route_* ops.
    Routing new_routing(int64_t rows, int n_used) {
        Routing r;
        r.n_used = n_used;
        r.rows = rows;
        r.experts = alloc_ints(rows * n_used);
        r.weights = alloc(rows, n_used);
        return r;
    }
};

// The CPU backend with n_threads workers (>= 1).
std::unique_ptr<Backend> make_cpu_backend(int n_threads);

}  // namespace ds4

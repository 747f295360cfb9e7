// The op set a model family's forward pass is written in. Families never
// touch activation memory directly: they ask the backend for tensors and run
// ops on them, so the same forward code runs on the CPU and on CUDA.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"

namespace ds4 {

// A weight inside a mapped region: ggml layout, ne[0] is the row length;
// 3-D tensors hold one [ne0 x ne1] matrix per expert.
struct WeightRef {
    GgmlType type = GgmlType::F32;
    const uint8_t* data = nullptr;
    int64_t ne[4] = {1, 1, 1, 1};
    size_t row_bytes = 0;     // bytes of one row of ne[0] elements
    size_t matrix_bytes = 0;  // bytes of one ne[0] x ne[1] matrix (expert stride)
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

// Per-token MoE routing results: n_used experts and their weights each.
struct Routing {
    int n_used = 0;
    std::vector<int32_t> experts;  // [tokens x n_used]
    std::vector<float> weights;    // [tokens x n_used]
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;

    virtual Tensor alloc(int64_t rows, int64_t cols) = 0;
    // Copies between host memory and a tensor (no-ops in spirit on the CPU).
    virtual void upload(Tensor& t, const float* host) = 0;
    virtual void download(const Tensor& t, float* host) = 0;

    // out[i] = table row ids[i], dequantized.
    virtual void get_rows(const WeightRef& table, const int32_t* ids, int64_t n, Tensor& out) = 0;
    // y[t][r] = sum_k W[r][k] x[t][k]   (W: ne[0] = k columns, ne[1] rows).
    // For a 3-D weight, `matrix` picks the expert matrix.
    virtual void matmul(const WeightRef& w, const Tensor& x, Tensor& y, int64_t matrix = 0) = 0;
    // RMS norm over groups of `group` values (group = cols for a whole row,
    // head_dim for per-head norms), times weight (length group) if given.
    virtual void rms_norm(const Tensor& x, const WeightRef* weight, float eps, int64_t group, Tensor& y) = 0;
    // Rotates each head of x (cols = n_heads * head_dim) at its position.
    virtual void rope(Tensor& x, int head_dim, const int32_t* positions, const RopeParams& p) = 0;
    // Writes k/v rows for positions [pos0, pos0 + k.rows) into the layer cache.
    virtual void kv_store(Tensor& k_cache, Tensor& v_cache, const Tensor& k, const Tensor& v, int64_t pos0) = 0;
    // Causal attention of q rows at positions pos0.. against cache rows [0, pos0 + q.rows).
    virtual void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t pos0,
                           const AttentionParams& p, Tensor& out) = 0;
    virtual void add(const Tensor& a, const Tensor& b, Tensor& out) = 0;       // out = a + b
    virtual void scale(Tensor& x, float s) = 0;                                  // x *= s
    virtual void mul_row(Tensor& x, const WeightRef& w) = 0;                     // x[t][i] *= w[i] (or w[0] if 1 element)
    virtual void add_row(Tensor& x, const WeightRef& b) = 0;                     // x[t][i] += b[i]
    virtual void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) = 0;  // silu(gate) * up
    // Softmax-gated top-k routing (ties: lower expert id first), optional
    // renormalisation of the chosen weights and a final scale.
    virtual Routing route_softmax_topk(const Tensor& logits, int n_used, bool norm, float w_scale) = 0;
    // out[t] = sum_j routing.weights[t][j] * FFN_expert(routing.experts[t][j])(x[t])
    // with SwiGLU experts gate/up/down (3-D weights); optional per-expert scales.
    virtual void moe_swiglu(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                            const WeightRef& down, const WeightRef* gate_scale, const WeightRef* up_scale,
                            const WeightRef* down_scale, Tensor& out) = 0;
};

// The CPU backend with n_threads workers (>= 1).
std::unique_ptr<Backend> make_cpu_backend(int n_threads);

}  // namespace ds4

// GLM-5's (glm-dsa) op pack on CUDA: shape checks here, kernels in
// glm_dsa_*.cu. Semantics are the CPU backend's (cpu_ops_glm_dsa.cpp), op
// for op. The step's positions, slots and row sets are read on the device
// and nothing waits for the GPU, so a decode step can be recorded as a CUDA
// graph; for the same reason the positions and slots are not checked here
// as the CPU checks them (the session checks them against the context
// before the step).
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_ops_glm_dsa.h"
#include "common/error.h"

namespace ds4 {

namespace {

[[noreturn]] void shape_error(const std::string& op, const std::string& what) {
    throw Error("CUDA " + op + ": " + what + ".");
}

}  // namespace

void CudaBackend::cache_store(Tensor& cache, const Tensor& rows, const CacheRows& where) {
    if (rows.cols != cache.cols)
        throw Error("cache rows of " + std::to_string(cache.cols) + " values cannot hold rows of " +
                    std::to_string(rows.cols) + ".");
    if (rows.rows <= 0) return;
    if (where.positions.n < rows.rows || where.slots.n < rows.rows || where.slot_rows <= 0)
        shape_error("cache_store", std::to_string(rows.rows) + " rows but " + std::to_string(where.positions.n) +
                                       " positions and " + std::to_string(where.slots.n) + " slots");
    const auto t = timed("cache_store");
    cuda::glm_cache_store(rows.data, rows.cols, where.positions.data, where.slots.data, where.slot_rows, rows.rows,
                          rows.cols, cache.data, cache.rows, stream_);
}

RowSets CudaBackend::plan_causal(const CacheRows& where, int64_t n) {
    const auto prof = timed("plan causal");
    if (where.positions.n < n || where.slots.n < n)
        shape_error("plan_causal", std::to_string(n) + " batch rows but " + std::to_string(where.positions.n) +
                                       " positions");
    RowSets s;
    s.cap = where.slot_rows;
    s.count = alloc_ints(n);
    s.base = alloc_ints(n);
    cuda::glm_plan_causal(where.positions.data, where.slots.data, where.slot_rows, n, s.count.data, s.base.data,
                          stream_);
    return s;
}

void CudaBackend::layer_norm(const Tensor& x, const WeightRef* weight, const WeightRef* bias, float eps, Tensor& y) {
    if (y.rows != x.rows || y.cols != x.cols)
        shape_error("layer_norm", "an output of " + std::to_string(y.rows) + " x " + std::to_string(y.cols) +
                                      " for " + std::to_string(x.rows) + " x " + std::to_string(x.cols));
    const auto t = timed("layer_norm");
    std::shared_ptr<void> keep_w, keep_b;
    const float* w = weight ? weight_vector(*weight, x.cols, keep_w) : nullptr;
    const float* b = bias ? weight_vector(*bias, x.cols, keep_b) : nullptr;
    cuda::glm_layer_norm(x.data, x.rows, x.cols, w, b, eps, y.data, stream_);
}

void CudaBackend::head_columns(const Tensor& src, int n_heads, int head_dim, int offset, int width, Tensor& dst) {
    if (offset < 0 || width < 0 || offset + width > head_dim || src.cols != int64_t(n_heads) * head_dim ||
        dst.cols != int64_t(n_heads) * width || dst.rows != src.rows)
        throw Error("head columns [" + std::to_string(offset) + ", " + std::to_string(offset + width) +
                    ") do not fit " + std::to_string(n_heads) + " heads of " + std::to_string(head_dim) + ".");
    const auto t = timed("head_columns");
    cuda::glm_head_columns(src.data, src.cols, src.rows, n_heads, head_dim, offset, width, dst.data, dst.cols,
                           stream_);
}

Routing CudaBackend::route_sigmoid(const Tensor& logits, const WeightRef* bias_w, int n_used, int n_groups,
                                   int n_group_used, bool norm, float w_scale) {
    const int64_t n_exp = logits.cols;
    if (n_used <= 0 || n_used > n_exp)
        throw Error("routing " + std::to_string(n_used) + " of " + std::to_string(n_exp) + " experts is impossible.");
    const bool grouped = n_groups > 1;
    if (grouped && (n_exp % n_groups != 0 || n_group_used < 1 || n_group_used > n_groups ||
                    int64_t(n_group_used) * (n_exp / n_groups) < n_used))
        throw Error("routing " + std::to_string(n_used) + " of " + std::to_string(n_exp) + " experts from " +
                    std::to_string(n_group_used) + " of " + std::to_string(n_groups) + " groups is impossible.");
    Routing r = new_routing(logits.rows, n_used);
    const auto t = timed("route sigmoid");
    std::shared_ptr<void> keep;
    cuda::SigmoidRouteArgs a{};
    a.logits = logits.data;
    a.bias = bias_w ? weight_vector(*bias_w, n_exp, keep) : nullptr;
    a.n_tok = logits.rows;
    a.n_exp = int(n_exp);
    a.n_used = n_used;
    a.n_groups = grouped ? n_groups : 1;
    a.n_group_used = grouped ? n_group_used : 1;
    a.norm = norm;
    a.w_scale = w_scale;
    a.experts = r.experts.data;
    a.weights = r.weights.data;
    cuda::glm_route_sigmoid(a, stream_);
    return r;
}

void CudaBackend::attention_latent(const Tensor& q_lat, const Tensor& q_pe, const Tensor& latent, const Tensor& pe,
                                   const RowSets& rows, int n_head, float scale, Tensor& out) {
    if (n_head <= 0) shape_error("attention_latent", std::to_string(n_head) + " heads");
    const int64_t d_lat = q_lat.cols / n_head, d_pe = q_pe.cols / n_head;
    if (q_lat.cols != n_head * d_lat || q_pe.cols != n_head * d_pe || latent.cols != d_lat || pe.cols != d_pe ||
        pe.rows != latent.rows || out.cols != q_lat.cols || q_pe.rows != q_lat.rows || out.rows < q_lat.rows)
        throw Error("latent attention: queries of " + std::to_string(q_lat.cols) + " + " +
                    std::to_string(q_pe.cols) + " values do not fit " + std::to_string(n_head) +
                    " heads over cache rows of " + std::to_string(latent.cols) + " + " + std::to_string(pe.cols) +
                    ".");
    if (q_lat.rows <= 0) return;
    if (rows.count.n < q_lat.rows || (!rows.rows.data && rows.base.n < q_lat.rows) ||
        (rows.rows.data && rows.rows.n < q_lat.rows * rows.cap))
        shape_error("attention_latent", "row sets for " + std::to_string(rows.count.n) + " of " +
                                            std::to_string(q_lat.rows) + " query rows");
    const auto t = timed("attention_latent");
    cuda::LatentAttentionArgs a{};
    a.q_lat = q_lat.data;
    a.q_pe = q_pe.data;
    a.latent = latent.data;
    a.pe = pe.data;
    a.rows = {rows.count.data, rows.base.data, rows.rows.data, rows.cap};
    a.out = out.data;
    a.n_tok = q_lat.rows;
    a.n_head = n_head;
    a.d_lat = int(d_lat);
    a.d_pe = int(d_pe);
    a.scale = scale;
    // The sets' largest possible size: the listed form's capacity, else every cache row.
    a.n_split = cuda::latent_attention_splits(a.n_tok, n_head, rows.rows.data ? rows.cap : latent.rows);
    const SplitParts parts = split_parts(a.n_tok, n_head, a.n_split, d_lat);
    a.part_o = parts.o;
    a.part_ml = parts.ml;
    cuda::glm_attention_latent(a, stream_);
}

}  // namespace ds4

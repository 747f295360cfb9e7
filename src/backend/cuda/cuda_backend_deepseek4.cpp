// DeepSeek V4's ops on CUDA (all but the MoE routing and experts, which live
// with the shared MoE kernels): shape checks here, kernels in dsv4_*.cu.
// Semantics are the CPU backend's, op for op.
//
// Every index list (the plans, the indexer's choice) is made and read on
// the device and nothing waits for the GPU, so a step of these ops can be
// recorded as a CUDA graph. Ids made by the plan ops are valid by
// construction; the kernels do not check them again.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cublas_library.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_ops_deepseek4.h"
#include "common/error.h"

namespace ds4 {

using cuda::check;

namespace {

// Decoded weight rows handed to cuBLAS at a time, as CudaBackend::matmul.
constexpr size_t kDequantFloats = size_t(64) << 20 >> 2;  // 64 MiB
// Indexer scores kept on the device at a time (query rows x visible keys).
constexpr int64_t kScoreFloats = int64_t(16) << 20;  // 64 MiB

int64_t elements(const WeightRef& w) { return w.ne[0] * w.ne[1] * w.ne[2] * w.ne[3]; }

cuda::RowSetsView view(const RowSets& r) { return {r.count.data, r.base.data, r.rows.data, r.cap}; }

[[noreturn]] void shape_error(const std::string& op, const std::string& what) {
    throw Error("CUDA " + op + ": " + what + ".");
}

}  // namespace

void CudaBackend::rope_partial(Tensor& x, int head_dim, int offset, const IntArray& positions, const RopeParams& p,
                               bool inverse) {
    const auto prof = timed("rope partial");
    if (offset < 0 || offset + p.n_rot > head_dim || p.n_rot % 2 != 0)
        throw Error("rope over dims [" + std::to_string(offset) + ", " + std::to_string(offset + p.n_rot) +
                    ") does not fit a head of " + std::to_string(head_dim) + ".");
    if (head_dim <= 0 || x.cols % head_dim != 0)
        shape_error("rope_partial", "rows of " + std::to_string(x.cols) + " values are not whole heads of " +
                                        std::to_string(head_dim));
    if (x.rows <= 0) return;
    if (positions.n < x.rows)
        shape_error("rope_partial", std::to_string(positions.n) + " positions for " + std::to_string(x.rows) + " rows");
    cuda::rope_partial(x.data, x.rows, x.cols, head_dim, offset, positions.data, p, inverse, stream_);
}

void CudaBackend::hc_mixes(const Tensor& mixes, const WeightRef& scale_w, const WeightRef& base_w, const HcParams& p,
                           Tensor& pre, Tensor* post, Tensor* comb) {
    const auto prof = timed("hc mixes");
    const int64_t hc = p.n_hc;
    const int64_t need = comb ? (2 + hc) * hc : post ? 2 * hc : hc;
    if (mixes.cols < need || elements(base_w) < need || elements(scale_w) < (comb ? 3 : post ? 2 : 1))
        shape_error("hc_mixes", "mixes of " + std::to_string(mixes.cols) + " values, base of " +
                                    std::to_string(elements(base_w)) + " do not fit " + std::to_string(hc) +
                                    " streams");
    if (pre.size() < mixes.rows * hc || (post && post->size() < mixes.rows * hc) ||
        (comb && comb->size() < mixes.rows * hc * hc))
        shape_error("hc_mixes", "outputs too small for " + std::to_string(mixes.rows) + " rows");
    std::shared_ptr<void> keep_s, keep_b;
    const float* scale = weight_vector(scale_w, elements(scale_w), keep_s);
    const float* base = weight_vector(base_w, elements(base_w), keep_b);
    cuda::hc_mixes(mixes.data, mixes.rows, mixes.cols, scale, base, p, pre.data, post ? post->data : nullptr,
                   comb ? comb->data : nullptr, stream_);
}

void CudaBackend::hc_collapse(const Tensor& x, const Tensor& pre, Tensor& out) {
    const auto prof = timed("hc collapse");
    const int64_t hc = pre.cols, E = out.cols;
    if (x.cols < hc * E || pre.rows < x.rows || out.rows < x.rows)
        shape_error("hc_collapse", std::to_string(hc) + " streams of " + std::to_string(E) +
                                       " values do not fit rows of " + std::to_string(x.cols));
    cuda::hc_collapse(x.data, x.cols, pre.data, int(hc), x.rows, E, out.data, out.cols, stream_);
}

void CudaBackend::hc_expand(const Tensor& y, const Tensor& residual, const Tensor& post, const Tensor& comb,
                            Tensor& out) {
    const auto prof = timed("hc expand");
    const int64_t hc = post.cols, E = y.cols;
    if (residual.cols < hc * E || out.cols < hc * E || comb.cols < hc * hc || residual.rows < y.rows ||
        out.rows < y.rows || post.rows < y.rows || comb.rows < y.rows)
        shape_error("hc_expand", std::to_string(hc) + " streams of " + std::to_string(E) +
                                     " values do not fit the residual of " + std::to_string(residual.cols));
    cuda::hc_expand(y.data, y.cols, residual.data, residual.cols, post.data, comb.data, int(hc), y.rows, E, out.data,
                    out.cols, stream_);
}

// Decode: every group in one grouped matvec launch. Prefill: one batched
// cuBLAS product over the groups, on rows decoded to float in one launch
// where the groups' matrices follow each other and fit the buffer (a launch
// pair per group otherwise).
void CudaBackend::matmul_grouped(const WeightRef& w, const Tensor& x, Tensor& y) {
    const int64_t k = w.ne[0], r = w.ne[1], G = w.ne[2], T = x.rows;
    if (x.cols != G * k || y.cols != G * r)
        throw Error("grouped projection '" + w.name + "' does not fit its input of " + std::to_string(x.cols) +
                    " columns.");
    if (y.rows < T) shape_error("matmul_grouped", "output of " + std::to_string(y.rows) + " rows for " +
                                                      std::to_string(T) + " inputs");
    const uint8_t* base = device_ptr(w.data, uint64_t(w.matrix_bytes) * uint64_t(G), w.name);
    if (T <= 0 || r <= 0 || k <= 0 || G <= 0) return;
    if (T <= cuda::kMatvecMaxTokens) {
        cuda::matvec(w.type, base, w.row_bytes, k, r, x.data, x.cols, T, y.data, y.cols, stream_,
                     cuda::MatvecGroups{G, w.matrix_bytes, k, r});
        return;
    }
    const float one = 1.0f, zero = 0.0f;
    const bool contiguous = w.matrix_bytes == size_t(r) * w.row_bytes;
    if (w.type == GgmlType::F32 && w.row_bytes % sizeof(float) == 0 && w.matrix_bytes % sizeof(float) == 0) {
        check(cuda::cublas().sgemm_strided_batched(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, int(r), int(T), int(k), &one,
                                                   reinterpret_cast<const float*>(base),
                                                   int(w.row_bytes / sizeof(float)),
                                                   int64_t(w.matrix_bytes / sizeof(float)), x.data, int(x.cols), k,
                                                   &zero, y.data, int(y.cols), r, int(G)),
              "cublasSgemmStridedBatched (grouped)");
        return;
    }
    if (contiguous && G * r * k <= int64_t(kDequantFloats)) {
        float* wf = dequant_buffer(size_t(G * r * k));
        cuda::dequantize_rows(w.type, base, w.row_bytes, k, G * r, nullptr, wf, k, stream_);
        check(cuda::cublas().sgemm_strided_batched(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, int(r), int(T), int(k), &one,
                                                   wf, int(k), r * k, x.data, int(x.cols), k, &zero, y.data,
                                                   int(y.cols), r, int(G)),
              "cublasSgemmStridedBatched (grouped)");
        return;
    }
    for (int64_t g = 0; g < G; ++g) {
        const uint8_t* wg = base + size_t(g) * w.matrix_bytes;
        const float* xg = x.data + g * k;
        float* yg = y.data + g * r;
        const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(r, int64_t(kDequantFloats) / k));
        float* wf = dequant_buffer(size_t(chunk * k));
        for (int64_t r0 = 0; r0 < r; r0 += chunk) {
            const int64_t m = std::min(chunk, r - r0);
            cuda::dequantize_rows(w.type, wg + size_t(r0) * w.row_bytes, w.row_bytes, k, m, nullptr, wf, k, stream_);
            check(cuda::cublas().sgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, int(m), int(T), int(k), &one, wf, int(k),
                                       xg, int(x.cols), &zero, yg + r0, int(y.cols)),
                  "cublasSgemm (grouped)");
        }
    }
}

void CudaBackend::swiglu_clamp(const Tensor& gate, const Tensor& up, float limit, Tensor& out) {
    const auto prof = timed("swiglu clamp");
    if (gate.size() != up.size() || out.size() < gate.size())
        shape_error("swiglu_clamp", "tensors of " + std::to_string(gate.size()) + " and " +
                                        std::to_string(up.size()) + " values do not match");
    cuda::swiglu_clamp(gate.data, up.data, limit, gate.size(), out.data, stream_);
}

void CudaBackend::broadcast_streams(const Tensor& x, Tensor& streams) {
    const auto prof = timed("broadcast streams");
    const int64_t E = x.cols;
    if (E <= 0 || streams.cols % E != 0 || streams.rows < x.rows)
        shape_error("broadcast_streams", "streams of " + std::to_string(streams.cols) +
                                             " values are not copies of rows of " + std::to_string(E));
    cuda::broadcast_streams(x.data, x.rows, E, int(streams.cols / E), streams.data, streams.cols, stream_);
}

Dsv4Rows CudaBackend::plan_rows(const CacheRows& batch, int64_t n) {
    const auto prof = timed("plan rows");
    if (batch.positions.n < n || batch.slots.n < n)
        shape_error("plan_rows", std::to_string(n) + " batch rows but " + std::to_string(batch.positions.n) +
                                     " positions");
    Dsv4Rows r = new_rows_plan(*this, batch, n);
    cuda::plan_rows(r.positions.data, r.slots.data, n, r.run_first.data, r.run_last.data, stream_);
    return r;
}

IntArray CudaBackend::plan_ring(const Dsv4Rows& rows, int64_t ring) {
    const auto prof = timed("plan ring");
    IntArray dst = alloc_ints(rows.n);
    cuda::plan_ring(rows.positions.data, rows.slots.data, rows.run_last.data, rows.n, ring, dst.data, stream_);
    return dst;
}

Dsv4CompressorPlan CudaBackend::plan_compressor(const Dsv4Rows& rows, int ratio, bool overlap, int64_t cache_rows) {
    const auto prof = timed("plan compressor");
    if (ratio <= 0) shape_error("plan_compressor", "a ratio of " + std::to_string(ratio));
    const int64_t n = rows.n;
    Dsv4CompressorPlan c = new_compressor_plan(*this, n, ratio, overlap, cache_rows);
    c.ring_dst = plan_ring(rows, c.ring);
    const cuda::CompressorPlanArgs a{rows.positions.data, rows.slots.data, rows.run_first.data, n,
                                     ratio, overlap, c.ring, cache_rows, c.in_block.data, c.sources.data,
                                     c.block_pos.data, c.cache_dst.data, c.visible.count.data, c.visible.base.data};
    cuda::plan_compressor(a, stream_);
    return c;
}

void CudaBackend::compress_pool(const Tensor& state_kv, const Tensor& state_score, const Tensor& kv,
                                const Tensor& score, const IntArray& sources, int per_block, bool overlap,
                                Tensor& out) {
    const auto prof = timed("compress pool");
    const int64_t D = out.cols, nb = out.rows;
    if (nb <= 0 || D <= 0) return;
    const int64_t width = overlap ? 2 * D : D;
    if (per_block <= 0 || state_kv.cols < width || state_score.cols < width || kv.cols < width || score.cols < width ||
        state_score.rows < state_kv.rows || score.rows < kv.rows)
        shape_error("compress_pool", "sources of " + std::to_string(kv.cols) + " columns do not hold " +
                                         std::to_string(width) + " pooled values");
    if (sources.n < nb * per_block)
        shape_error("compress_pool", std::to_string(sources.n) + " source ids for " + std::to_string(nb) +
                                         " rows of " + std::to_string(per_block));
    const cuda::PoolSources s{kv.data,       score.data,       kv.rows,          kv.cols,         score.cols,
                              state_kv.data, state_score.data, state_kv.cols, state_score.cols};
    cuda::compress_pool(s, sources.data, per_block, overlap, nb, D, out.data, stream_);
}

void CudaBackend::scatter_rows(const Tensor& src, const IntArray& dst_rows, Tensor& dst) {
    const auto prof = timed("scatter rows");
    if (dst_rows.n < src.rows || src.cols < dst.cols)
        shape_error("scatter_rows", std::to_string(dst_rows.n) + " destinations for " + std::to_string(src.rows) +
                                        " rows of " + std::to_string(src.cols) + " values into rows of " +
                                        std::to_string(dst.cols));
    cuda::scatter_rows(src.data, src.cols, dst_rows.data, src.rows, dst.data, dst.cols, dst.cols, stream_);
}

// Scores and the top-k selection run on the GPU, in groups of query rows
// when the score matrix (rows x the sets' cap) would pass kScoreFloats.
RowSets CudaBackend::indexer_topk(const Tensor& q, const Tensor& w, const Tensor& keys, const RowSets& visible,
                                  int64_t top_k) {
    const int64_t T = q.rows, H = w.cols, Di = keys.cols;
    if (top_k < 0) throw Error("the indexer cannot keep " + std::to_string(top_k) + " rows.");
    if (q.cols != H * Di || w.rows < T || visible.count.n < T)
        shape_error("indexer_topk", "queries of " + std::to_string(q.cols) + " values are not " + std::to_string(H) +
                                        " heads of " + std::to_string(Di));
    RowSets out;
    out.cap = top_k;
    out.count = alloc_ints(T);
    out.rows = alloc_ints(std::max<int64_t>(1, T * top_k));
    if (T <= 0) return out;
    const int64_t cap = std::max<int64_t>(1, visible.cap);
    const int64_t group = std::max<int64_t>(1, std::min<int64_t>(T, kScoreFloats / cap));
    auto d_scores = device_scratch(sizeof(float) * size_t(group * cap));
    float* scores = static_cast<float*>(d_scores.get());
    for (int64_t r0 = 0; r0 < T; r0 += group) {
        const int64_t nr = std::min(group, T - r0);
        cuda::RowSetsView v = view(visible);
        v.count += r0;
        if (v.base) v.base += r0;
        if (v.rows) v.rows += r0 * v.cap;
        std::optional<cuda::OpProfile::Scope> prof(timed("indexer scores"));
        cuda::indexer_scores(q.data + r0 * q.cols, q.cols, w.data + r0 * w.cols, w.cols, int(H), int(Di), keys.data,
                             v, nr, scores, cap, stream_);
        prof.reset();
        prof.emplace(timed("indexer top-k"));
        cuda::indexer_select_topk(scores, cap, v, nr, top_k, out.rows.data + r0 * top_k, out.count.data + r0,
                                  stream_);
    }
    return out;
}

void CudaBackend::attention_window_sink(const Tensor& q, const Tensor& k, const Tensor& window, const Dsv4Rows& rows,
                                        int64_t n_swa, const Tensor* comp, const RowSets* comp_rows,
                                        const WeightRef& sinks_w, const AttentionParams& p, Tensor& out) {
    const auto prof = timed("attention window sink");
    const int64_t T = q.rows, D = p.head_dim_k, H = p.n_head;
    if (T <= 0) return;
    if (D <= 0 || H <= 0 || q.cols != H * D || out.cols != H * D || out.rows < T || k.rows < T || k.cols < D ||
        rows.n < T)
        shape_error("attention_window_sink", "queries of " + std::to_string(q.cols) + " values are not " +
                                                 std::to_string(H) + " heads of " + std::to_string(D));
    if (n_swa <= 0 || window.cols < D || window.rows < n_swa)
        shape_error("attention_window_sink", "a window ring of " + std::to_string(window.rows) + " rows cannot hold " +
                                                 std::to_string(n_swa) + " positions");
    if (D > cuda::kWindowSinkMaxHeadDim)
        throw Error("CUDA window attention supports head dimensions up to " +
                    std::to_string(cuda::kWindowSinkMaxHeadDim) + ", not " + std::to_string(D) + ".");
    cuda::WindowSinkArgs a{};
    a.q = q.data;
    a.k = k.data;
    a.window = window.data;
    a.positions = rows.positions.data;
    a.run_first = rows.run_first.data;
    a.slots = rows.slots.data;
    a.out = out.data;
    a.n_tok = T;
    a.n_swa = n_swa;
    a.ld_k = k.cols;
    a.ld_window = window.cols;
    a.n_head = int(H);
    a.head_dim = int(D);
    a.scale = p.scale;
    if (comp && comp_rows) {
        if (comp->cols < D)
            shape_error("attention_window_sink", "compressed rows of " + std::to_string(comp->cols) + " values");
        a.comp = comp->data;
        a.ld_comp = comp->cols;
        a.comp_rows = view(*comp_rows);
    }
    std::shared_ptr<void> keep;
    a.sinks = weight_vector(sinks_w, H, keep);
    cuda::attention_window_sink(a, stream_);
}

}  // namespace ds4

// DeepSeek V4's ops on CUDA (all but the MoE routing and experts, which live
// with the shared MoE kernels): shape checks and host-side index lists here,
// kernels in dsv4_*.cu. Semantics are the CPU backend's, op for op.
//
// Host synchronisation: only indexer_topk waits for the GPU (it returns host
// RowLists by design: one download of the chosen rows per call). copy_rows
// passes its row ids as kernel parameters and rope_partial reads device
// positions, so both can be recorded in a CUDA graph; compress_pool,
// indexer_topk and attention_window_sink upload host index lists from
// pageable memory, which a recording cannot hold (DeepSeek V4 decode is not
// replayable while they do).
#include <algorithm>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
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

// Pageable host memory: the copy is staged before cudaMemcpyAsync returns,
// so the host list may go away at once.
void copy_to_device(const std::shared_ptr<void>& dev, const void* host, size_t bytes, cudaStream_t stream,
                    const char* what) {
    if (bytes) check(cudaMemcpyAsync(dev.get(), host, bytes, cudaMemcpyHostToDevice, stream), what);
}

[[noreturn]] void shape_error(const std::string& op, const std::string& what) {
    throw Error("CUDA " + op + ": " + what + ".");
}

}  // namespace

void CudaBackend::rope_partial(Tensor& x, int head_dim, int offset, const IntArray& positions, const RopeParams& p,
                               bool inverse) {
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
    const int64_t hc = pre.cols, E = out.cols;
    if (x.cols < hc * E || pre.rows < x.rows || out.rows < x.rows)
        shape_error("hc_collapse", std::to_string(hc) + " streams of " + std::to_string(E) +
                                       " values do not fit rows of " + std::to_string(x.cols));
    cuda::hc_collapse(x.data, x.cols, pre.data, int(hc), x.rows, E, out.data, out.cols, stream_);
}

void CudaBackend::hc_expand(const Tensor& y, const Tensor& residual, const Tensor& post, const Tensor& comb,
                            Tensor& out) {
    const int64_t hc = post.cols, E = y.cols;
    if (residual.cols < hc * E || out.cols < hc * E || comb.cols < hc * hc || residual.rows < y.rows ||
        out.rows < y.rows || post.rows < y.rows || comb.rows < y.rows)
        shape_error("hc_expand", std::to_string(hc) + " streams of " + std::to_string(E) +
                                     " values do not fit the residual of " + std::to_string(residual.cols));
    cuda::hc_expand(y.data, y.cols, residual.data, residual.cols, post.data, comb.data, int(hc), y.rows, E, out.data,
                    out.cols, stream_);
}

// Per group: the decode matvec for a few tokens, dequantize + cuBLAS for
// many (as CudaBackend::matmul), on column slices of x and y.
void CudaBackend::matmul_grouped(const WeightRef& w, const Tensor& x, Tensor& y) {
    const int64_t k = w.ne[0], r = w.ne[1], G = w.ne[2], T = x.rows;
    if (x.cols != G * k || y.cols != G * r)
        throw Error("grouped projection '" + w.name + "' does not fit its input of " + std::to_string(x.cols) +
                    " columns.");
    if (y.rows < T) shape_error("matmul_grouped", "output of " + std::to_string(y.rows) + " rows for " +
                                                      std::to_string(T) + " inputs");
    const uint8_t* base = device_ptr(w.data, uint64_t(w.matrix_bytes) * uint64_t(G), w.name);
    if (T <= 0 || r <= 0 || k <= 0) return;
    const float one = 1.0f, zero = 0.0f;
    for (int64_t g = 0; g < G; ++g) {
        const uint8_t* wg = base + size_t(g) * w.matrix_bytes;
        const float* xg = x.data + g * k;
        float* yg = y.data + g * r;
        if (T <= cuda::kMatvecMaxTokens) {
            cuda::matvec(w.type, wg, w.row_bytes, k, r, xg, x.cols, T, yg, y.cols, stream_);
        } else if (w.type == GgmlType::F32) {
            check(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, int(r), int(T), int(k), &one,
                              reinterpret_cast<const float*>(wg), int(w.row_bytes / sizeof(float)), xg, int(x.cols),
                              &zero, yg, int(y.cols)),
                  "cublasSgemm (grouped)");
        } else {
            const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(r, int64_t(kDequantFloats) / k));
            float* wf = dequant_buffer(size_t(chunk * k));
            for (int64_t r0 = 0; r0 < r; r0 += chunk) {
                const int64_t m = std::min(chunk, r - r0);
                cuda::dequantize_rows(w.type, wg + size_t(r0) * w.row_bytes, w.row_bytes, k, m, nullptr, wf, k,
                                      stream_);
                check(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, int(m), int(T), int(k), &one, wf, int(k), xg,
                                  int(x.cols), &zero, yg + r0, int(y.cols)),
                      "cublasSgemm (grouped)");
            }
        }
    }
}

void CudaBackend::swiglu_clamp(const Tensor& gate, const Tensor& up, float limit, Tensor& out) {
    if (gate.size() != up.size() || out.size() < gate.size())
        shape_error("swiglu_clamp", "tensors of " + std::to_string(gate.size()) + " and " +
                                        std::to_string(up.size()) + " values do not match");
    cuda::swiglu_clamp(gate.data, up.data, limit, gate.size(), out.data, stream_);
}

void CudaBackend::compress_pool(const Tensor& state_kv, const Tensor& state_score, const Tensor& kv,
                                const Tensor& score, const int32_t* sources, int per_block, bool overlap,
                                Tensor& out) {
    const int64_t D = out.cols, nb = out.rows;
    if (nb <= 0 || D <= 0) return;
    const int64_t width = overlap ? 2 * D : D;
    if (per_block <= 0 || state_kv.cols < width || state_score.cols < width || kv.cols < width || score.cols < width ||
        state_score.rows < state_kv.rows || score.rows < kv.rows)
        shape_error("compress_pool", "sources of " + std::to_string(kv.cols) + " columns do not hold " +
                                         std::to_string(width) + " pooled values");
    // A bad id would read outside the tensors on the device: refuse it here.
    const int64_t n_ids = nb * per_block, limit = state_kv.rows + kv.rows;
    for (int64_t i = 0; i < n_ids; ++i)
        if (sources[i] < -1 || sources[i] >= limit)
            throw Error("compressor source row " + std::to_string(sources[i]) + " is outside the " +
                        std::to_string(limit) + " rows of state and chunk.");
    auto d_sources = device_scratch(sizeof(int32_t) * size_t(n_ids));
    copy_to_device(d_sources, sources, sizeof(int32_t) * size_t(n_ids), stream_, "uploading compressor sources");
    const cuda::PoolSources s{state_kv.data, state_score.data, state_kv.rows, state_kv.cols, state_score.cols,
                              kv.data,       score.data,       kv.cols,       score.cols};
    cuda::compress_pool(s, static_cast<const int32_t*>(d_sources.get()), per_block, overlap, nb, D, out.data,
                        stream_);
}

void CudaBackend::copy_rows(const Tensor& src, const int32_t* src_rows, Tensor& dst, const int32_t* dst_rows,
                            int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        if (src_rows[i] < 0 || src_rows[i] >= src.rows || dst_rows[i] < 0 || dst_rows[i] >= dst.rows)
            throw Error("row copy out of range (" + std::to_string(src_rows[i]) + " -> " + std::to_string(dst_rows[i]) +
                        "); the context is too small.");
    }
    if (src.cols < dst.cols)
        shape_error("copy_rows", "source rows of " + std::to_string(src.cols) + " values cannot fill rows of " +
                                     std::to_string(dst.cols));
    cuda::copy_rows(src.data, src.cols, src_rows, dst.data, dst.cols, dst_rows, n, dst.cols, stream_);
}

// Scores and the top-k selection run on the GPU; only the chosen row ids
// come back (one synchronising download per call, in groups of query rows
// when the score matrix would pass kScoreFloats).
RowLists CudaBackend::indexer_topk(const Tensor& q, const Tensor& w, const Tensor& keys, const int32_t* n_visible,
                                   int64_t top_k) {
    const int64_t T = q.rows, H = w.cols, Di = keys.cols;
    if (top_k < 0) throw Error("the indexer cannot keep " + std::to_string(top_k) + " rows.");
    if (q.cols != H * Di || w.rows < T)
        shape_error("indexer_topk", "queries of " + std::to_string(q.cols) + " values are not " + std::to_string(H) +
                                        " heads of " + std::to_string(Di));
    int64_t max_nv = 0;
    bool select = false;
    for (int64_t t = 0; t < T; ++t) {
        if (n_visible[t] < 0 || n_visible[t] > keys.rows)
            throw Error("the indexer sees " + std::to_string(n_visible[t]) + " compressed rows of " +
                        std::to_string(keys.rows) + ".");
        max_nv = std::max<int64_t>(max_nv, n_visible[t]);
        select = select || n_visible[t] > top_k;
    }
    std::vector<int32_t> chosen;
    if (select) {
        auto d_nv = device_scratch(sizeof(int32_t) * size_t(T));
        copy_to_device(d_nv, n_visible, sizeof(int32_t) * size_t(T), stream_, "uploading indexer visibility");
        const int64_t group = std::max<int64_t>(1, std::min<int64_t>(T, kScoreFloats / max_nv));
        auto d_scores = device_scratch(sizeof(float) * size_t(group * max_nv));
        auto d_out = device_scratch(sizeof(int32_t) * size_t(T * top_k));
        const int32_t* nv = static_cast<const int32_t*>(d_nv.get());
        float* scores = static_cast<float*>(d_scores.get());
        int32_t* out = static_cast<int32_t*>(d_out.get());
        for (int64_t r0 = 0; r0 < T; r0 += group) {
            const int64_t nr = std::min(group, T - r0);
            cuda::indexer_scores(q.data + r0 * q.cols, q.cols, w.data + r0 * w.cols, w.cols, int(H), int(Di),
                                 keys.data, nv + r0, nr, max_nv, scores, max_nv, stream_);
            cuda::indexer_select_topk(scores, max_nv, nv + r0, nr, top_k, out + r0 * top_k, stream_);
        }
        chosen.resize(size_t(T * top_k));
        check(cudaMemcpyAsync(chosen.data(), out, sizeof(int32_t) * chosen.size(), cudaMemcpyDeviceToHost, stream_),
              "downloading the indexer's choice");
        check(cudaStreamSynchronize(stream_), "downloading the indexer's choice");
    }
    RowLists r;
    r.offsets.reserve(size_t(T) + 1);
    r.offsets.push_back(0);
    for (int64_t t = 0; t < T; ++t) {
        if (n_visible[t] <= top_k) {
            for (int32_t j = 0; j < n_visible[t]; ++j) r.rows.push_back(j);
        } else {
            r.rows.insert(r.rows.end(), chosen.begin() + t * top_k, chosen.begin() + (t + 1) * top_k);
        }
        r.offsets.push_back(int32_t(r.rows.size()));
    }
    return r;
}

void CudaBackend::attention_window_sink(const Tensor& q, const Tensor& k, const Tensor& window, int64_t pos0,
                                        int64_t n_swa, const Tensor* comp, const RowLists* comp_rows,
                                        const WeightRef& sinks_w, const AttentionParams& p, Tensor& out) {
    const int64_t T = q.rows, D = p.head_dim_k, H = p.n_head;
    if (T <= 0) return;
    if (D <= 0 || H <= 0 || q.cols != H * D || out.cols != H * D || out.rows < T || k.rows < T || k.cols < D)
        shape_error("attention_window_sink", "queries of " + std::to_string(q.cols) + " values are not " +
                                                 std::to_string(H) + " heads of " + std::to_string(D));
    if (n_swa <= 0 || (pos0 > 0 && (window.rows < n_swa || window.cols < D)))
        shape_error("attention_window_sink", "a window ring of " + std::to_string(window.rows) + " rows cannot hold " +
                                                 std::to_string(n_swa) + " positions");
    if (D > cuda::kWindowSinkMaxHeadDim)
        throw Error("CUDA window attention supports head dimensions up to " +
                    std::to_string(cuda::kWindowSinkMaxHeadDim) + ", not " + std::to_string(D) + ".");
    cuda::WindowSinkArgs a{};
    a.q = q.data;
    a.k = k.data;
    a.window = window.data;
    a.out = out.data;
    a.n_tok = T;
    a.pos0 = pos0;
    a.n_swa = n_swa;
    a.ld_k = k.cols;
    a.ld_window = window.cols;
    a.n_head = int(H);
    a.head_dim = int(D);
    a.scale = p.scale;
    std::shared_ptr<void> d_offsets, d_rows;
    if (comp && comp_rows && !comp_rows->rows.empty()) {
        const auto& off = comp_rows->offsets;
        const auto& rows = comp_rows->rows;
        if (int64_t(off.size()) != T + 1 || off[0] < 0 || comp->cols < D)
            shape_error("attention_window_sink", "compressed row lists for " + std::to_string(off.size()) +
                                                     " offsets do not fit " + std::to_string(T) + " queries");
        for (int64_t t = 0; t < T; ++t)
            if (off[t + 1] < off[t] || off[t + 1] > int64_t(rows.size()))
                shape_error("attention_window_sink", "compressed row lists are not ordered");
        for (int32_t row : rows)
            if (row < 0 || row >= comp->rows)
                throw Error("attention asks for compressed row " + std::to_string(row) + " of " +
                            std::to_string(comp->rows) + ".");
        d_offsets = device_scratch(sizeof(int32_t) * off.size());
        d_rows = device_scratch(sizeof(int32_t) * rows.size());
        copy_to_device(d_offsets, off.data(), sizeof(int32_t) * off.size(), stream_, "uploading compressed row offsets");
        copy_to_device(d_rows, rows.data(), sizeof(int32_t) * rows.size(), stream_, "uploading compressed rows");
        a.comp = comp->data;
        a.ld_comp = comp->cols;
        a.comp_offsets = static_cast<const int32_t*>(d_offsets.get());
        a.comp_rows = static_cast<const int32_t*>(d_rows.get());
    }
    std::shared_ptr<void> keep;
    a.sinks = weight_vector(sinks_w, H, keep);
    cuda::attention_window_sink(a, stream_);
}

}  // namespace ds4

#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <numeric>
#include <vector>

#include "common/error.h"
#include "common/host_memory.h"
#include "quant/quant.h"

namespace ds4 {

std::unique_ptr<Backend> make_cpu_backend(int n_threads) { return std::make_unique<CpuBackend>(n_threads); }

Tensor CpuBackend::alloc(int64_t rows, int64_t cols) {
    Tensor t;
    t.rows = rows;
    t.cols = cols;
    auto buf = std::shared_ptr<float[]>(new float[static_cast<size_t>(std::max<int64_t>(1, rows * cols))]());
    t.data = buf.get();
    t.owner = buf;
    return t;
}

// Empty tensors (a snapshot of a slot before its first position) copy
// nothing: their host side may be a null pointer, which memcpy must not get.
void CpuBackend::upload(Tensor& t, const float* host) {
    if (t.size() > 0) std::memcpy(t.data, host, sizeof(float) * t.size());
}
void CpuBackend::download(const Tensor& t, float* host) {
    if (t.size() > 0) std::memcpy(host, t.data, sizeof(float) * t.size());
}

uint64_t CpuBackend::available_memory() const { return available_host_memory(); }

IntArray CpuBackend::alloc_ints(int64_t n) {
    IntArray a;
    a.n = n;
    auto buf = std::shared_ptr<int32_t[]>(new int32_t[static_cast<size_t>(std::max<int64_t>(1, n))]());
    a.data = buf.get();
    a.owner = buf;
    return a;
}

void CpuBackend::upload_ints(IntArray& a, const int32_t* host) {
    if (a.n > 0) std::memcpy(a.data, host, sizeof(int32_t) * a.n);
}
void CpuBackend::download_ints(const IntArray& a, int32_t* host) {
    if (a.n > 0) std::memcpy(host, a.data, sizeof(int32_t) * a.n);
}

void CpuBackend::get_rows(const WeightRef& table, const IntArray& ids, Tensor& out) {
    for (int64_t i = 0; i < ids.n; ++i) {
        if (ids.data[i] < 0 || ids.data[i] >= table.ne[1])
            throw Error("row " + std::to_string(ids.data[i]) + " of '" + table.name + "' does not exist (it has " +
                        std::to_string(table.ne[1]) + ").");
    }
    pool_.parallel_for(ids.n, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
            dequantize_row(table.type, table.data + static_cast<size_t>(ids.data[i]) * table.row_bytes,
                           out.data + i * out.cols, table.ne[0]);
    });
}

void CpuBackend::matmul(const WeightRef& w, const Tensor& x, Tensor& y, int64_t matrix) {
    const int64_t k = w.ne[0];
    const int64_t n_rows = w.ne[1];
    const int64_t T = x.rows;
    const uint8_t* base = w.data + static_cast<size_t>(matrix) * w.matrix_bytes;
    // With several tokens, dequantize each weight row once and reuse it for
    // every token; with one token, the fused dequant-dot is cheaper.
    const bool reuse_rows = T > 2 && w.type != GgmlType::F32;
    pool_.parallel_for(n_rows, 8, [&](int64_t rb, int64_t re) {
        std::vector<float> row;
        if (reuse_rows) row.resize(static_cast<size_t>(k));
        for (int64_t r = rb; r < re; ++r) {
            const uint8_t* wr = base + static_cast<size_t>(r) * w.row_bytes;
            if (reuse_rows) {
                dequantize_row(w.type, wr, row.data(), k);
                for (int64_t t = 0; t < T; ++t)
                    y.data[t * y.cols + r] = dot_row(GgmlType::F32, row.data(), x.data + t * x.cols, k);
            } else {
                for (int64_t t = 0; t < T; ++t)
                    y.data[t * y.cols + r] = dot_row(w.type, wr, x.data + t * x.cols, k);
            }
        }
    });
}

void CpuBackend::rms_norm(const Tensor& x, const WeightRef* weight, float eps, int64_t group, Tensor& y) {
    const int64_t groups_per_row = x.cols / group;
    std::vector<float> wf;
    if (weight) {
        wf.resize(static_cast<size_t>(group));
        dequantize_row(weight->type, weight->data, wf.data(), group);
    }
    pool_.parallel_for(x.rows * groups_per_row, 16, [&](int64_t b, int64_t e) {
        for (int64_t g = b; g < e; ++g) {
            const float* src = x.data + g * group;
            float* dst = y.data + g * group;
            double ss = 0.0;
            for (int64_t i = 0; i < group; ++i) ss += static_cast<double>(src[i]) * src[i];
            const float inv = 1.0f / std::sqrt(static_cast<float>(ss / group) + eps);
            for (int64_t i = 0; i < group; ++i) dst[i] = src[i] * inv * (weight ? wf[i] : 1.0f);
        }
    });
}

namespace {

// Cache row of step row t: its slot's first row plus its position.
int64_t cache_row(const CacheRows& rows, int64_t t, int64_t cache_rows) {
    const int64_t pos = rows.positions.data[t], slot = rows.slots.data[t];
    if (pos < 0 || pos >= rows.slot_rows)
        throw Error("the context of " + std::to_string(rows.slot_rows) + " tokens is full (position " +
                    std::to_string(pos + 1) + " requested); raise --ctx.");
    if (slot < 0 || (slot + 1) * rows.slot_rows > cache_rows)
        throw Error("sequence slot " + std::to_string(slot) + " is outside a cache of " +
                    std::to_string(cache_rows / std::max<int64_t>(1, rows.slot_rows)) + " slots.");
    return slot * rows.slot_rows + pos;
}

}  // namespace

void CpuBackend::kv_store(Tensor& k_cache, Tensor& v_cache, const Tensor& k, const Tensor& v, const CacheRows& rows) {
    for (int64_t t = 0; t < k.rows; ++t) {
        const int64_t r = cache_row(rows, t, k_cache.rows);
        std::memcpy(k_cache.data + r * k_cache.cols, k.data + t * k.cols, sizeof(float) * k.cols);
        std::memcpy(v_cache.data + r * v_cache.cols, v.data + t * v.cols, sizeof(float) * v.cols);
    }
}

void CpuBackend::gather_rows(const Tensor& src, const IntArray& rows, Tensor& dst) {
    for (int64_t i = 0; i < dst.rows; ++i) {
        const int64_t r = rows.data[i];
        if (r < 0 || r >= src.rows) throw Error("gather_rows: row " + std::to_string(r) + " is outside the source.");
        std::memcpy(dst.data + i * dst.cols, src.data + r * src.cols, sizeof(float) * src.cols);
    }
}

void CpuBackend::top_k_rows(const Tensor& x, int k, Tensor& values, IntArray& ids, IntArray& first_bad) {
    check_top_k_shapes(x, k, values, ids, first_bad);
    pool_.parallel_for(x.rows, 1, [&](int64_t b, int64_t e) {
        std::vector<int32_t> order(static_cast<size_t>(x.cols));
        for (int64_t t = b; t < e; ++t) {
            const float* row = x.data + t * x.cols;
            int32_t bad = -1;
            for (int64_t i = 0; i < x.cols && bad < 0; ++i)
                if (std::isnan(row[i]) || row[i] == INFINITY) bad = static_cast<int32_t>(i);
            first_bad.data[t] = bad;
            std::iota(order.begin(), order.end(), 0);
            // A NaN sorts as -infinity (the comparison must stay a strict
            // order); its row is flagged above and its order means nothing.
            auto value = [row](int32_t i) { return std::isnan(row[i]) ? -INFINITY : row[i]; };
            std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t i, int32_t j) {
                const float a = value(i), c = value(j);
                return a > c || (a == c && i < j);
            });
            for (int j = 0; j < k; ++j) {
                ids.data[t * k + j] = order[static_cast<size_t>(j)];
                values.data[t * k + j] = row[order[static_cast<size_t>(j)]];
            }
        }
    });
}

void CpuBackend::prepare_margins(int64_t rows) {
    if (margins_ && int64_t(margins_->size()) < rows)
        margins_->resize(size_t(rows), std::numeric_limits<double>::infinity());
}

void CpuBackend::note_selection(int64_t row, const float* score, const int32_t* order, int64_t n, int64_t k) {
    if (!margins_ || k <= 0 || k >= n) return;  // no choice to make
    float next = -INFINITY, scale = 0.0f;
    for (int64_t i = k; i < n; ++i) next = std::max(next, score[order[i]]);
    for (int64_t i = 0; i < n; ++i)
        if (std::isfinite(score[order[i]])) scale = std::max(scale, std::fabs(score[order[i]]));
    const float kth = score[order[k - 1]];
    double m = std::numeric_limits<double>::infinity();  // nothing left to choose instead (all masked)
    if (std::isfinite(next)) m = scale > 0.0f ? (double(kth) - next) / scale : 0.0;
    double& slot = (*margins_)[size_t(row)];
    slot = std::min(slot, m);
}

void CpuBackend::copy(const Tensor& src, Tensor& dst) {
    if (src.size() != dst.size()) throw Error("copy: tensors of " + std::to_string(src.size()) + " and " +
                                              std::to_string(dst.size()) + " values.");
    std::memcpy(dst.data, src.data, sizeof(float) * size_t(src.size()));
}

void CpuBackend::attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const CacheRows& rows,
                           const AttentionParams& p, Tensor& out) {
    const int group = p.n_head / p.n_head_kv;
    const IntArray& positions = rows.positions;
    for (int64_t t = 0; t < q.rows; ++t) cache_row(rows, t, k_cache.rows);  // checks slot and position
    pool_.parallel_for(q.rows * p.n_head, 1, [&](int64_t b, int64_t e) {
        std::vector<float> scores;
        std::vector<double> acc(static_cast<size_t>(p.head_dim_v));
        for (int64_t job = b; job < e; ++job) {
            const int64_t t = job / p.n_head;
            const int h = static_cast<int>(job % p.n_head);
            const int hk = h / group;
            const int64_t n_kv = int64_t(positions.data[t]) + 1;  // causal: keys up to this position
            const int64_t base = int64_t(rows.slots.data[t]) * rows.slot_rows;  // the row's own sequence
            const float* qv = q.data + t * q.cols + static_cast<int64_t>(h) * p.head_dim_k;
            scores.resize(static_cast<size_t>(n_kv));
            float mx = -INFINITY;
            for (int64_t j = 0; j < n_kv; ++j) {
                const float* kv = k_cache.data + (base + j) * k_cache.cols + static_cast<int64_t>(hk) * p.head_dim_k;
                float s = 0.0f;
                for (int d = 0; d < p.head_dim_k; ++d) s += qv[d] * kv[d];
                scores[j] = s * p.scale;
                mx = std::max(mx, scores[j]);
            }
            double sum = 0.0;
            for (int64_t j = 0; j < n_kv; ++j) {
                scores[j] = std::exp(scores[j] - mx);
                sum += scores[j];
            }
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int64_t j = 0; j < n_kv; ++j) {
                const float* vv = v_cache.data + (base + j) * v_cache.cols + static_cast<int64_t>(hk) * p.head_dim_v;
                const double w = scores[j];
                for (int d = 0; d < p.head_dim_v; ++d) acc[d] += w * vv[d];
            }
            float* o = out.data + t * out.cols + static_cast<int64_t>(h) * p.head_dim_v;
            for (int d = 0; d < p.head_dim_v; ++d) o[d] = static_cast<float>(acc[d] / sum);
        }
    });
}

void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
    for (int64_t i = 0; i < a.size(); ++i) out.data[i] = a.data[i] + b.data[i];
}

void CpuBackend::scale(Tensor& x, float s) {
    for (int64_t i = 0; i < x.size(); ++i) x.data[i] *= s;
}

void CpuBackend::mul_row(Tensor& x, const WeightRef& w) {
    const int64_t n = w.ne[0] * w.ne[1] * w.ne[2] * w.ne[3];
    std::vector<float> wf(static_cast<size_t>(n));
    dequantize_row(w.type, w.data, wf.data(), n);
    for (int64_t t = 0; t < x.rows; ++t)
        for (int64_t i = 0; i < x.cols; ++i) x.data[t * x.cols + i] *= wf[n == 1 ? 0 : i];
}

void CpuBackend::add_row(Tensor& x, const WeightRef& b) {
    std::vector<float> bf(static_cast<size_t>(x.cols));
    dequantize_row(b.type, b.data, bf.data(), x.cols);
    for (int64_t t = 0; t < x.rows; ++t)
        for (int64_t i = 0; i < x.cols; ++i) x.data[t * x.cols + i] += bf[i];
}

void CpuBackend::swiglu(const Tensor& gate, const Tensor& up, Tensor& out) {
    for (int64_t i = 0; i < gate.size(); ++i) {
        const float g = gate.data[i];
        out.data[i] = g / (1.0f + std::exp(-g)) * up.data[i];
    }
}

Routing CpuBackend::route_softmax_topk(const Tensor& logits, int n_used, bool norm, float w_scale) {
    const int64_t n_exp = logits.cols;
    if (n_used <= 0 || n_used > n_exp)
        throw Error("routing " + std::to_string(n_used) + " of " + std::to_string(n_exp) + " experts is impossible.");
    Routing r = new_routing(logits.rows, n_used);
    std::vector<float> probs(static_cast<size_t>(n_exp));
    std::vector<int32_t> idx(static_cast<size_t>(n_exp));
    prepare_margins(logits.rows);
    for (int64_t t = 0; t < logits.rows; ++t) {
        const float* l = logits.data + t * n_exp;
        const float mx = *std::max_element(l, l + n_exp);
        double sum = 0.0;
        for (int64_t e = 0; e < n_exp; ++e) {
            probs[e] = std::exp(l[e] - mx);
            sum += probs[e];
        }
        for (int64_t e = 0; e < n_exp; ++e) probs[e] = static_cast<float>(probs[e] / sum);
        for (int64_t e = 0; e < n_exp; ++e) idx[e] = static_cast<int32_t>(e);
        std::partial_sort(idx.begin(), idx.begin() + n_used, idx.end(), [&](int32_t a, int32_t b) {
            return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
        });
        note_selection(t, probs.data(), idx.data(), n_exp, n_used);
        double wsum = 0.0;
        for (int j = 0; j < n_used; ++j) wsum += probs[idx[j]];
        // Same guard as the reference: never divide by less than f16's
        // smallest normal.
        const double denom = norm ? std::max(wsum, 6.103515625e-5) : 1.0;
        for (int j = 0; j < n_used; ++j) {
            r.experts.data[t * n_used + j] = idx[j];
            float w = static_cast<float>(probs[idx[j]] / denom);
            if (w_scale != 0.0f && w_scale != 1.0f) w *= w_scale;
            r.weights.data[t * n_used + j] = w;
        }
    }
    return r;
}

void CpuBackend::moe_swiglu(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                            const WeightRef& down, const WeightRef* gate_scale, const WeightRef* up_scale,
                            const WeightRef* down_scale, Tensor& out) {
    moe_ffn(x, routing, gate, up, down, gate_scale, up_scale, down_scale, 0.0f, out);
}

void CpuBackend::moe_swiglu_clamp(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                                  const WeightRef& down, float limit, Tensor& out) {
    moe_ffn(x, routing, gate, up, down, nullptr, nullptr, nullptr, limit, out);
}

void CpuBackend::moe_ffn(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                         const WeightRef& down, const WeightRef* gate_scale, const WeightRef* up_scale,
                         const WeightRef* down_scale, float limit, Tensor& out) {
    const int64_t n_exp = gate.ne[2];
    const int64_t n_ff = gate.ne[1];
    const int64_t n_embd = x.cols;
    const int n_used = routing.n_used;
    std::fill(out.data, out.data + out.size(), 0.0f);

    // Group the (token, slot) pairs by expert so each expert's weights are
    // read once per batch, not once per token.
    std::vector<std::vector<int64_t>> by_expert(static_cast<size_t>(n_exp));
    for (int64_t t = 0; t < x.rows; ++t)
        for (int j = 0; j < n_used; ++j) {
            const int32_t e = routing.experts.data[t * n_used + j];
            if (e < 0 || e >= n_exp)
                throw Error("routing chose expert " + std::to_string(e) + " of " + std::to_string(n_exp) + ".");
            by_expert[static_cast<size_t>(e)].push_back(t * n_used + j);
        }
    // Per-expert output scales are F32 vectors of n_expert values (checked
    // when the model is loaded); a one-element scale applies to all.
    auto expert_scale = [](const WeightRef* s, int64_t e) {
        if (!s) return 1.0f;
        const float* v = reinterpret_cast<const float*>(s->data);
        return s->ne[0] > 1 ? v[e] : v[0];
    };
    std::vector<float> slot_out(static_cast<size_t>(x.rows * n_used * n_embd));
    // Experts still being read come last, after a wait: the others are
    // computed while their bytes arrive. Each (token, slot) pair has its own
    // row of slot_out and the sum below runs in routing order, so the order
    // the experts are computed in changes no bit of the result.
    auto pending = [&](int64_t e) { return routing.arrival && routing.arrival->pending(int32_t(e)); };
    std::vector<int64_t> order;
    size_t ready = 0;
    for (const bool late : {false, true}) {
        for (int64_t e = 0; e < n_exp; ++e)
            if (!by_expert[size_t(e)].empty() && pending(e) == late) order.push_back(e);
        if (!late) ready = order.size();
    }
    for (size_t k = 0; k < order.size(); ++k) {
        if (k == ready && routing.arrival) routing.arrival->wait();
        const int64_t e = order[k];
        const auto& slots = by_expert[static_cast<size_t>(e)];
        const int64_t m = static_cast<int64_t>(slots.size());
        Tensor xs = alloc(m, n_embd), g = alloc(m, n_ff), u = alloc(m, n_ff), d = alloc(m, n_embd);
        for (int64_t i = 0; i < m; ++i) {
            const int64_t t = slots[i] / n_used;
            std::memcpy(xs.data + i * n_embd, x.data + t * n_embd, sizeof(float) * n_embd);
        }
        matmul(gate, xs, g, e);
        matmul(up, xs, u, e);
        if (gate_scale) scale(g, expert_scale(gate_scale, e));
        if (up_scale) scale(u, expert_scale(up_scale, e));
        swiglu_clamp(g, u, limit, g);
        matmul(down, g, d, e);
        const float ds = expert_scale(down_scale, e);
        for (int64_t i = 0; i < m; ++i) {
            const float w = routing.weights.data[slots[i]] * ds;
            float* o = slot_out.data() + slots[i] * n_embd;
            const float* src = d.data + i * n_embd;
            for (int64_t c = 0; c < n_embd; ++c) o[c] = src[c] * w;
        }
    }
    for (int64_t t = 0; t < x.rows; ++t)
        for (int j = 0; j < n_used; ++j) {
            const float* s = slot_out.data() + (t * n_used + j) * n_embd;
            float* o = out.data + t * n_embd;
            for (int64_t c = 0; c < n_embd; ++c) o[c] += s[c];
        }
}

}  // namespace ds4

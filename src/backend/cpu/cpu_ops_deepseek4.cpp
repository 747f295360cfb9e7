// CPU reference implementations of the DeepSeek V4 ops:
// hyper-connections, grouped output projection, clamped SwiGLU,
// sqrt-softplus routing, compressor pooling, lightning indexer and
// sliding-window attention with sinks. Written to follow ggml's float
// arithmetic step by step where the order matters for 1e-6 agreement.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"
#include "quant/quant.h"

namespace ds4 {

namespace {

std::vector<float> to_floats(const WeightRef& w) {
    const int64_t n = w.ne[0] * w.ne[1] * w.ne[2] * w.ne[3];
    std::vector<float> v(static_cast<size_t>(n));
    dequantize_row(w.type, w.data, v.data(), n);
    return v;
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

void CpuBackend::hc_mixes(const Tensor& mixes, const WeightRef& scale_w, const WeightRef& base_w, const HcParams& p,
                          Tensor& pre, Tensor* post, Tensor* comb) {
    const int hc = p.n_hc;
    const std::vector<float> scale = to_floats(scale_w);
    const std::vector<float> base = to_floats(base_w);
    for (int64_t t = 0; t < mixes.rows; ++t) {
        const float* m = mixes.data + t * mixes.cols;
        for (int h = 0; h < hc; ++h) pre.data[t * hc + h] = sigmoid(m[h] * scale[0] + base[h]) * 1.0f + p.eps;
        if (post)
            for (int h = 0; h < hc; ++h) post->data[t * hc + h] = sigmoid(m[hc + h] * scale[1] + base[hc + h]) * 2.0f;
        if (!comb) continue;
        // c[dst + hc*src]: ggml's [dst, src] layout.
        float* c = comb->data + t * hc * hc;
        for (int i = 0; i < hc * hc; ++i) c[i] = m[2 * hc + i] * scale[2] + base[2 * hc + i];
        for (int src = 0; src < hc; ++src) {  // softmax over dst
            float* r = c + src * hc;
            const float mx = *std::max_element(r, r + hc);
            double sum = 0.0;
            for (int d = 0; d < hc; ++d) {
                r[d] = std::exp(r[d] - mx);
                sum += r[d];
            }
            const float inv = static_cast<float>(1.0 / sum);
            for (int d = 0; d < hc; ++d) r[d] = r[d] * inv + p.eps;
        }
        auto norm_cols = [&] {  // for each dst, normalise over src
            for (int d = 0; d < hc; ++d) {
                double s = 0.0;
                for (int src = 0; src < hc; ++src) s += c[d + hc * src];
                const float den = static_cast<float>(s) + p.eps;
                for (int src = 0; src < hc; ++src) c[d + hc * src] /= den;
            }
        };
        auto norm_rows = [&] {  // for each src, normalise over dst
            for (int src = 0; src < hc; ++src) {
                double s = 0.0;
                for (int d = 0; d < hc; ++d) s += c[d + hc * src];
                const float den = static_cast<float>(s) + p.eps;
                for (int d = 0; d < hc; ++d) c[d + hc * src] /= den;
            }
        };
        norm_cols();
        for (int i = 1; i < p.sinkhorn_iters; ++i) {
            norm_rows();
            norm_cols();
        }
    }
}

void CpuBackend::hc_collapse(const Tensor& x, const Tensor& pre, Tensor& out) {
    const int64_t hc = pre.cols;
    const int64_t E = out.cols;
    pool_.parallel_for(x.rows, 1, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
            float* o = out.data + t * E;
            const float* w = pre.data + t * hc;
            const float* xs = x.data + t * x.cols;
            for (int64_t i = 0; i < E; ++i) o[i] = xs[i] * w[0];
            for (int64_t h = 1; h < hc; ++h)
                for (int64_t i = 0; i < E; ++i) o[i] += xs[h * E + i] * w[h];
        }
    });
}

void CpuBackend::hc_expand(const Tensor& y, const Tensor& residual, const Tensor& post, const Tensor& comb,
                           Tensor& out) {
    const int64_t hc = post.cols;
    const int64_t E = y.cols;
    pool_.parallel_for(y.rows, 1, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
            const float* yv = y.data + t * E;
            const float* res = residual.data + t * residual.cols;
            const float* c = comb.data + t * hc * hc;
            for (int64_t dst = 0; dst < hc; ++dst) {
                float* o = out.data + t * out.cols + dst * E;
                const float pd = post.data[t * hc + dst];
                for (int64_t i = 0; i < E; ++i) o[i] = yv[i] * pd;
                for (int64_t src = 0; src < hc; ++src) {
                    const float w = c[dst + hc * src];
                    for (int64_t i = 0; i < E; ++i) o[i] += res[src * E + i] * w;
                }
            }
        }
    });
}

void CpuBackend::matmul_grouped(const WeightRef& w, const Tensor& x, Tensor& y) {
    const int64_t k = w.ne[0], r = w.ne[1], G = w.ne[2];
    if (x.cols != G * k || y.cols != G * r)
        throw Error("grouped projection '" + w.name + "' does not fit its input of " + std::to_string(x.cols) + " columns.");
    const bool reuse_rows = x.rows > 2 && w.type != GgmlType::F32;
    pool_.parallel_for(G * r, 4, [&](int64_t b, int64_t e) {
        std::vector<float> row;
        if (reuse_rows) row.resize(static_cast<size_t>(k));
        for (int64_t gi = b; gi < e; ++gi) {
            const int64_t g = gi / r, i = gi % r;
            const uint8_t* wr = w.data + static_cast<size_t>(g) * w.matrix_bytes + static_cast<size_t>(i) * w.row_bytes;
            if (reuse_rows) dequantize_row(w.type, wr, row.data(), k);
            for (int64_t t = 0; t < x.rows; ++t) {
                const float* xv = x.data + t * x.cols + g * k;
                y.data[t * y.cols + gi] =
                    reuse_rows ? dot_row(GgmlType::F32, row.data(), xv, k) : dot_row(w.type, wr, xv, k);
            }
        }
    });
}

void CpuBackend::swiglu_clamp(const Tensor& gate, const Tensor& up, float limit, Tensor& out) {
    const bool clamp = limit > 1e-6f;
    for (int64_t i = 0; i < gate.size(); ++i) {
        float g = gate.data[i], u = up.data[i];
        if (clamp) {
            g = std::min(g, limit);
            u = std::clamp(u, -limit, limit);
        }
        out.data[i] = g / (1.0f + std::exp(-g)) * u;
    }
}

Routing CpuBackend::route_sqrt_softplus(const Tensor& logits, const WeightRef* bias_w, const WeightRef* hash,
                                        const IntArray* tokens, int n_used, bool norm, float w_scale) {
    const int64_t n_exp = logits.cols;
    if (n_used <= 0 || n_used > n_exp)
        throw Error("routing " + std::to_string(n_used) + " of " + std::to_string(n_exp) + " experts is impossible.");
    if (hash && (!tokens || tokens->n < logits.rows || hash->ne[0] != n_used))
        throw Error("hash routing needs a token per row and a table of " + std::to_string(n_used) + " experts per token.");
    Routing r = new_routing(logits.rows, n_used);
    std::vector<float> bias;
    if (bias_w) bias = to_floats(*bias_w);
    std::vector<float> probs(static_cast<size_t>(n_exp)), sel(static_cast<size_t>(n_exp));
    std::vector<int32_t> idx(static_cast<size_t>(n_exp));
    prepare_margins(logits.rows);
    for (int64_t t = 0; t < logits.rows; ++t) {
        const float* l = logits.data + t * n_exp;
        for (int64_t e = 0; e < n_exp; ++e) {
            const float sp = l[e] > 20.0f ? l[e] : std::log(1.0f + std::exp(l[e]));
            probs[e] = std::sqrt(sp);
            sel[e] = bias_w ? probs[e] + bias[e] : probs[e];
        }
        int32_t* chosen = r.experts.data + t * n_used;
        if (hash) {
            // The table's ids were checked when the model loaded.
            const int64_t tok = tokens->data[t];
            if (tok < 0 || tok >= hash->ne[1])
                throw Error("hash routing has no row for token " + std::to_string(tok) + ".");
            std::memcpy(chosen, hash->data + tok * hash->row_bytes, sizeof(int32_t) * size_t(n_used));
        } else {
            std::iota(idx.begin(), idx.end(), 0);
            std::partial_sort(idx.begin(), idx.begin() + n_used, idx.end(), [&](int32_t a, int32_t b) {
                return sel[a] > sel[b] || (sel[a] == sel[b] && a < b);
            });
            for (int j = 0; j < n_used; ++j) chosen[j] = idx[j];
            note_selection(t, sel.data(), idx.data(), n_exp, n_used);
        }
        double wsum = 0.0;
        for (int j = 0; j < n_used; ++j) wsum += probs[chosen[j]];
        const float denom = norm ? std::max(static_cast<float>(wsum), 6.103515625e-5f) : 1.0f;
        for (int j = 0; j < n_used; ++j) {
            float w = norm ? probs[chosen[j]] / denom : probs[chosen[j]];
            if (w_scale != 0.0f && w_scale != 1.0f) w *= w_scale;
            r.weights.data[t * n_used + j] = w;
        }
    }
    return r;
}

void CpuBackend::compress_pool(const Tensor& state_kv, const Tensor& state_score, const Tensor& kv,
                               const Tensor& score, const IntArray& sources, int per_block, bool overlap, Tensor& out) {
    const int64_t D = out.cols;
    const int64_t n_chunk = kv.rows, limit = kv.rows + state_kv.rows;
    if (sources.n < out.rows * per_block)
        throw Error("compressor pooling: " + std::to_string(sources.n) + " source ids for " +
                    std::to_string(out.rows) + " rows of " + std::to_string(per_block) + ".");
    for (int64_t i = 0; i < out.rows * per_block; ++i)
        if (sources.data[i] < -1 || sources.data[i] >= limit)
            throw Error("compressor source row " + std::to_string(sources.data[i]) + " is outside the " +
                        std::to_string(limit) + " rows of chunk and state.");
    pool_.parallel_for(out.rows, 1, [&](int64_t b, int64_t e) {
        std::vector<const float*> kvp(static_cast<size_t>(per_block)), scp(static_cast<size_t>(per_block));
        for (int64_t blk = b; blk < e; ++blk) {
            bool any = false;
            for (int j = 0; j < per_block; ++j) {
                const int32_t id = sources.data[blk * per_block + j];
                const int64_t col = overlap && j >= per_block / 2 ? D : 0;
                if (id < 0) {
                    kvp[j] = scp[j] = nullptr;
                } else if (id < n_chunk) {
                    kvp[j] = kv.data + id * kv.cols + col;
                    scp[j] = score.data + id * score.cols + col;
                } else {
                    kvp[j] = state_kv.data + (id - n_chunk) * state_kv.cols + col;
                    scp[j] = state_score.data + (id - n_chunk) * state_score.cols + col;
                }
                any = any || id >= 0;
            }
            float* o = out.data + blk * D;
            if (!any) {  // no block ends at this row
                std::fill(o, o + D, 0.0f);
                continue;
            }
            for (int64_t d = 0; d < D; ++d) {
                float mx = -INFINITY;
                for (int j = 0; j < per_block; ++j)
                    if (scp[j]) mx = std::max(mx, scp[j][d]);
                double sum = 0.0, acc = 0.0;
                for (int j = 0; j < per_block; ++j) {
                    if (!scp[j]) continue;
                    const float w = std::exp(scp[j][d] - mx);
                    sum += w;
                    acc += static_cast<double>(w) * kvp[j][d];
                }
                o[d] = static_cast<float>(acc / sum);
            }
        }
    });
}

void CpuBackend::scatter_rows(const Tensor& src, const IntArray& dst_rows, Tensor& dst) {
    if (dst_rows.n < src.rows || src.cols < dst.cols)
        throw Error("row scatter: " + std::to_string(dst_rows.n) + " destinations for " + std::to_string(src.rows) +
                    " rows of " + std::to_string(src.cols) + " values into rows of " + std::to_string(dst.cols) + ".");
    for (int64_t i = 0; i < src.rows; ++i) {
        const int32_t r = dst_rows.data[i];
        if (r < 0) continue;
        if (r >= dst.rows)
            throw Error("row scatter to row " + std::to_string(r) + " of " + std::to_string(dst.rows) +
                        "; the context is too small.");
        std::memcpy(dst.data + int64_t(r) * dst.cols, src.data + i * src.cols, sizeof(float) * size_t(dst.cols));
    }
}

void CpuBackend::broadcast_streams(const Tensor& x, Tensor& streams) {
    const int64_t E = x.cols;
    if (E <= 0 || streams.cols % E != 0 || streams.rows < x.rows)
        throw Error("streams of " + std::to_string(streams.cols) + " values are not copies of rows of " +
                    std::to_string(E) + ".");
    for (int64_t t = 0; t < x.rows; ++t)
        for (int64_t h = 0; h < streams.cols / E; ++h)
            std::memcpy(streams.data + t * streams.cols + h * E, x.data + t * E, sizeof(float) * size_t(E));
}

RowSets CpuBackend::indexer_topk(const Tensor& q, const Tensor& w, const Tensor& keys, const RowSets& visible,
                                 int64_t top_k) {
    const int64_t H = w.cols, Di = keys.cols, T = q.rows;
    if (top_k < 0) throw Error("the indexer cannot keep " + std::to_string(top_k) + " rows.");
    if (q.cols != H * Di || w.rows < T)
        throw Error("indexer queries of " + std::to_string(q.cols) + " values are not " + std::to_string(H) +
                    " heads of " + std::to_string(Di) + ".");
    RowSets out;
    out.cap = top_k;
    out.count = alloc_ints(T);
    out.rows = alloc_ints(T * top_k);
    for (int64_t t = 0; t < T; ++t) {
        const int64_t nv = visible.count.data[t], first = visible.rows.data ? 0 : visible.base.data[t];
        if (nv < 0 || nv > visible.cap || (!visible.rows.data && (first < 0 || first + nv > keys.rows)))
            throw Error("the indexer sees " + std::to_string(nv) + " compressed rows from row " +
                        std::to_string(first) + " of " + std::to_string(keys.rows) + ".");
    }
    prepare_margins(T);
    pool_.parallel_for(T, 1, [&](int64_t b, int64_t e) {
        std::vector<float> s;
        std::vector<int32_t> idx;
        for (int64_t t = b; t < e; ++t) {
            const int64_t nv = visible.count.data[t];
            auto key_row = [&](int64_t j) { return static_cast<int32_t>(visible.at(t, j)); };
            int32_t* o = out.rows.data + t * top_k;
            if (nv <= top_k) {
                for (int64_t j = 0; j < nv; ++j) o[j] = key_row(j);
                out.count.data[t] = static_cast<int32_t>(nv);
                continue;
            }
            s.assign(static_cast<size_t>(nv), 0.0f);
            for (int64_t j = 0; j < nv; ++j) {
                const float* k = keys.data + int64_t(key_row(j)) * Di;
                float acc = 0.0f;
                for (int64_t h = 0; h < H; ++h) {
                    const float* qh = q.data + t * q.cols + h * Di;
                    float dot = 0.0f;
                    for (int64_t d = 0; d < Di; ++d) dot += qh[d] * k[d];
                    acc += std::max(dot, 0.0f) * w.data[t * H + h];
                }
                s[j] = acc;
            }
            idx.resize(static_cast<size_t>(nv));
            std::iota(idx.begin(), idx.end(), 0);
            std::partial_sort(idx.begin(), idx.begin() + top_k, idx.end(),
                              [&](int32_t a, int32_t c) { return s[a] > s[c] || (s[a] == s[c] && a < c); });
            note_selection(t, s.data(), idx.data(), nv, top_k);
            std::sort(idx.begin(), idx.begin() + top_k);
            for (int64_t j = 0; j < top_k; ++j) o[j] = key_row(idx[j]);
            out.count.data[t] = static_cast<int32_t>(top_k);
        }
    });
    return out;
}

void CpuBackend::attention_window_sink(const Tensor& q, const Tensor& k, const Tensor& window, const Dsv4Rows& rows,
                                       int64_t n_swa, const Tensor* comp, const RowSets* comp_rows,
                                       const WeightRef& sinks_w, const AttentionParams& p, Tensor& out) {
    const int D = p.head_dim_k;
    if (rows.n < q.rows || n_swa <= 0)
        throw Error("window attention: " + std::to_string(rows.n) + " row positions for " + std::to_string(q.rows) +
                    " queries.");
    for (int64_t t = 0; t < q.rows; ++t) {
        const int64_t pos = rows.positions.data[t], first = rows.run_first.data[t];
        const int64_t lo = std::max<int64_t>(0, pos - n_swa + 1);
        if (pos - first > t || (lo < first && int64_t(rows.slots.data[t] + 1) * n_swa > window.rows))
            throw Error("window attention: row " + std::to_string(t) + " has no window to read.");
        if (comp && comp_rows)
            for (int64_t i = 0; i < comp_rows->count.data[t]; ++i) {
                const int64_t r = comp_rows->at(t, i);
                if (r < 0 || r >= comp->rows)
                    throw Error("attention asks for compressed row " + std::to_string(r) + " of " +
                                std::to_string(comp->rows) + ".");
            }
    }
    const std::vector<float> sinks = to_floats(sinks_w);
    pool_.parallel_for(q.rows * p.n_head, 1, [&](int64_t b, int64_t e) {
        std::vector<const float*> keys;
        std::vector<float> scores;
        std::vector<double> acc(static_cast<size_t>(D));
        for (int64_t job = b; job < e; ++job) {
            const int64_t t = job / p.n_head;
            const int h = static_cast<int>(job % p.n_head);
            const int64_t pos = rows.positions.data[t], first = rows.run_first.data[t];
            const float* ring = window.data + int64_t(rows.slots.data[t]) * n_swa * window.cols;
            keys.clear();
            // Positions of this run from the batch's keys, earlier ones from the slot's ring.
            for (int64_t j = std::max<int64_t>(0, pos - n_swa + 1); j <= pos; ++j)
                keys.push_back(j >= first ? k.data + (t - (pos - j)) * k.cols : ring + (j % n_swa) * window.cols);
            if (comp && comp_rows)
                for (int64_t i = 0; i < comp_rows->count.data[t]; ++i) {
                    const int64_t r = comp_rows->at(t, i);
                    keys.push_back(comp->data + r * comp->cols);
                }
            const float* qv = q.data + t * q.cols + static_cast<int64_t>(h) * D;
            scores.resize(keys.size());
            float mx = sinks[h];
            for (size_t j = 0; j < keys.size(); ++j) {
                float s = 0.0f;
                for (int d = 0; d < D; ++d) s += qv[d] * keys[j][d];
                scores[j] = s * p.scale;
                mx = std::max(mx, scores[j]);
            }
            double sum = std::exp(sinks[h] - mx);
            std::fill(acc.begin(), acc.end(), 0.0);
            for (size_t j = 0; j < keys.size(); ++j) {
                const float w = std::exp(scores[j] - mx);
                sum += w;
                for (int d = 0; d < D; ++d) acc[d] += static_cast<double>(w) * keys[j][d];
            }
            float* o = out.data + t * out.cols + static_cast<int64_t>(h) * D;
            for (int d = 0; d < D; ++d) o[d] = static_cast<float>(acc[d] / sum);
        }
    });
}

}  // namespace ds4

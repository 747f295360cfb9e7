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

Routing CpuBackend::route_sqrt_softplus(const Tensor& logits, const WeightRef* bias_w, const int32_t* forced,
                                        int n_used, bool norm, float w_scale) {
    const int64_t n_exp = logits.cols;
    if (n_used <= 0 || n_used > n_exp)
        throw Error("routing " + std::to_string(n_used) + " of " + std::to_string(n_exp) + " experts is impossible.");
    Routing r = new_routing(logits.rows, n_used);
    std::vector<float> bias;
    if (bias_w) bias = to_floats(*bias_w);
    std::vector<float> probs(static_cast<size_t>(n_exp)), sel(static_cast<size_t>(n_exp));
    std::vector<int32_t> idx(static_cast<size_t>(n_exp));
    for (int64_t t = 0; t < logits.rows; ++t) {
        const float* l = logits.data + t * n_exp;
        for (int64_t e = 0; e < n_exp; ++e) {
            const float sp = l[e] > 20.0f ? l[e] : std::log(1.0f + std::exp(l[e]));
            probs[e] = std::sqrt(sp);
            sel[e] = bias_w ? probs[e] + bias[e] : probs[e];
        }
        int32_t* chosen = r.experts.data + t * n_used;
        if (forced) {
            for (int j = 0; j < n_used; ++j) {
                const int32_t e = forced[t * n_used + j];
                if (e < 0 || e >= n_exp)
                    throw Error("hash routing names expert " + std::to_string(e) + " of " + std::to_string(n_exp) + ".");
                chosen[j] = e;
            }
        } else {
            std::iota(idx.begin(), idx.end(), 0);
            std::partial_sort(idx.begin(), idx.begin() + n_used, idx.end(), [&](int32_t a, int32_t b) {
                return sel[a] > sel[b] || (sel[a] == sel[b] && a < b);
            });
            for (int j = 0; j < n_used; ++j) chosen[j] = idx[j];
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
                               const Tensor& score, const int32_t* sources, int per_block, bool overlap, Tensor& out) {
    const int64_t D = out.cols;
    const int64_t n_state = state_kv.rows;
    pool_.parallel_for(out.rows, 1, [&](int64_t b, int64_t e) {
        std::vector<const float*> kvp(static_cast<size_t>(per_block)), scp(static_cast<size_t>(per_block));
        for (int64_t blk = b; blk < e; ++blk) {
            for (int j = 0; j < per_block; ++j) {
                const int32_t id = sources[blk * per_block + j];
                const int64_t col = overlap && j >= per_block / 2 ? D : 0;
                if (id < 0) {
                    kvp[j] = scp[j] = nullptr;
                } else if (id < n_state) {
                    kvp[j] = state_kv.data + id * state_kv.cols + col;
                    scp[j] = state_score.data + id * state_score.cols + col;
                } else {
                    kvp[j] = kv.data + (id - n_state) * kv.cols + col;
                    scp[j] = score.data + (id - n_state) * score.cols + col;
                }
            }
            float* o = out.data + blk * D;
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

void CpuBackend::copy_rows(const Tensor& src, const int32_t* src_rows, Tensor& dst, const int32_t* dst_rows, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        if (src_rows[i] < 0 || src_rows[i] >= src.rows || dst_rows[i] < 0 || dst_rows[i] >= dst.rows)
            throw Error("row copy out of range (" + std::to_string(src_rows[i]) + " -> " + std::to_string(dst_rows[i]) +
                        "); the context is too small.");
        std::memcpy(dst.data + int64_t(dst_rows[i]) * dst.cols, src.data + int64_t(src_rows[i]) * src.cols,
                    sizeof(float) * static_cast<size_t>(dst.cols));
    }
}

RowLists CpuBackend::indexer_topk(const Tensor& q, const Tensor& w, const Tensor& keys, const int32_t* n_visible,
                                  int64_t top_k) {
    const int64_t H = w.cols, Di = keys.cols;
    std::vector<std::vector<int32_t>> lists(static_cast<size_t>(q.rows));
    pool_.parallel_for(q.rows, 1, [&](int64_t b, int64_t e) {
        std::vector<float> s;
        std::vector<int32_t> idx;
        for (int64_t t = b; t < e; ++t) {
            const int64_t nv = n_visible[t];
            auto& out = lists[static_cast<size_t>(t)];
            if (nv <= top_k) {
                out.resize(static_cast<size_t>(nv));
                std::iota(out.begin(), out.end(), 0);
                continue;
            }
            s.assign(static_cast<size_t>(nv), 0.0f);
            for (int64_t j = 0; j < nv; ++j) {
                const float* k = keys.data + j * Di;
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
            out.assign(idx.begin(), idx.begin() + top_k);
            std::sort(out.begin(), out.end());
        }
    });
    RowLists r;
    r.offsets.push_back(0);
    for (auto& l : lists) {
        r.rows.insert(r.rows.end(), l.begin(), l.end());
        r.offsets.push_back(static_cast<int32_t>(r.rows.size()));
    }
    return r;
}

void CpuBackend::attention_window_sink(const Tensor& q, const Tensor& k, const Tensor& window, int64_t pos0,
                                       int64_t n_swa, const Tensor* comp, const RowLists* comp_rows,
                                       const WeightRef& sinks_w, const AttentionParams& p, Tensor& out) {
    const int D = p.head_dim_k;
    const std::vector<float> sinks = to_floats(sinks_w);
    pool_.parallel_for(q.rows * p.n_head, 1, [&](int64_t b, int64_t e) {
        std::vector<const float*> keys;
        std::vector<float> scores;
        std::vector<double> acc(static_cast<size_t>(D));
        for (int64_t job = b; job < e; ++job) {
            const int64_t t = job / p.n_head;
            const int h = static_cast<int>(job % p.n_head);
            const int64_t pos = pos0 + t;
            keys.clear();
            for (int64_t j = std::max<int64_t>(0, pos - n_swa + 1); j <= pos; ++j)
                keys.push_back(j >= pos0 ? k.data + (j - pos0) * k.cols : window.data + (j % n_swa) * window.cols);
            if (comp && comp_rows)
                for (int32_t i = comp_rows->offsets[t]; i < comp_rows->offsets[t + 1]; ++i)
                    keys.push_back(comp->data + int64_t(comp_rows->rows[i]) * comp->cols);
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

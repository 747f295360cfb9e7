// CPU reference implementations of the GLM-5 (glm-dsa) ops: latent-cache
// stores and causal sets, the indexer keys' layer norm, sigmoid routing with
// expert groups and multi-head latent attention over selected rows. Follows
// ggml's float arithmetic where the order matters for 1e-6 agreement.
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

std::vector<float> to_floats(const WeightRef& w, int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    dequantize_row(w.type, w.data, v.data(), n);
    return v;
}

// Cache row of batch row t, checked against the cache.
int64_t slot_row(const CacheRows& where, int64_t t, int64_t cache_rows) {
    const int64_t pos = where.positions.data[t], slot = where.slots.data[t];
    if (pos < 0 || pos >= where.slot_rows)
        throw Error("the context of " + std::to_string(where.slot_rows) + " tokens is full (position " +
                    std::to_string(pos + 1) + " requested); raise --ctx.");
    if (slot < 0 || (slot + 1) * where.slot_rows > cache_rows)
        throw Error("sequence slot " + std::to_string(slot) + " is outside a cache of " +
                    std::to_string(cache_rows / std::max<int64_t>(1, where.slot_rows)) + " slots.");
    return slot * where.slot_rows + pos;
}

}  // namespace

void CpuBackend::cache_store(Tensor& cache, const Tensor& rows, const CacheRows& where) {
    if (rows.cols != cache.cols)
        throw Error("cache rows of " + std::to_string(cache.cols) + " values cannot hold rows of " +
                    std::to_string(rows.cols) + ".");
    for (int64_t t = 0; t < rows.rows; ++t) {
        const int64_t r = slot_row(where, t, cache.rows);
        std::memcpy(cache.data + r * cache.cols, rows.data + t * rows.cols, sizeof(float) * size_t(rows.cols));
    }
}

RowSets CpuBackend::plan_causal(const CacheRows& where, int64_t n) {
    RowSets s;
    s.cap = where.slot_rows;
    s.count = alloc_ints(n);
    s.base = alloc_ints(n);
    for (int64_t t = 0; t < n; ++t) {
        // slot_rows bounds the product: slots were checked by the cache store.
        s.base.data[t] = static_cast<int32_t>(int64_t(where.slots.data[t]) * where.slot_rows);
        s.count.data[t] = where.positions.data[t] + 1;
    }
    return s;
}

void CpuBackend::layer_norm(const Tensor& x, const WeightRef* weight, const WeightRef* bias, float eps, Tensor& y) {
    const int64_t n = x.cols;
    std::vector<float> w, b;
    if (weight) w = to_floats(*weight, n);
    if (bias) b = to_floats(*bias, n);
    pool_.parallel_for(x.rows, 16, [&](int64_t rb, int64_t re) {
        for (int64_t r = rb; r < re; ++r) {
            const float* src = x.data + r * n;
            float* dst = y.data + r * n;
            // ggml_norm: the mean and the variance in double, the rest in float.
            double sum = 0.0;
            for (int64_t i = 0; i < n; ++i) sum += src[i];
            const float mean = static_cast<float>(sum / n);
            double ss = 0.0;
            for (int64_t i = 0; i < n; ++i) {
                const float d = src[i] - mean;
                dst[i] = d;
                ss += static_cast<double>(d) * d;
            }
            const float inv = 1.0f / std::sqrt(static_cast<float>(ss / n) + eps);
            for (int64_t i = 0; i < n; ++i) {
                float v = dst[i] * inv;
                if (weight) v *= w[size_t(i)];
                if (bias) v += b[size_t(i)];
                dst[i] = v;
            }
        }
    });
}

void CpuBackend::head_columns(const Tensor& src, int n_heads, int head_dim, int offset, int width, Tensor& dst) {
    if (offset < 0 || offset + width > head_dim || src.cols != int64_t(n_heads) * head_dim ||
        dst.cols != int64_t(n_heads) * width || dst.rows != src.rows)
        throw Error("head columns [" + std::to_string(offset) + ", " + std::to_string(offset + width) +
                    ") do not fit " + std::to_string(n_heads) + " heads of " + std::to_string(head_dim) + ".");
    for (int64_t t = 0; t < src.rows; ++t)
        for (int h = 0; h < n_heads; ++h)
            std::memcpy(dst.data + t * dst.cols + int64_t(h) * width,
                        src.data + t * src.cols + int64_t(h) * head_dim + offset, sizeof(float) * size_t(width));
}

Routing CpuBackend::route_sigmoid(const Tensor& logits, const WeightRef* bias_w, int n_used, int n_groups,
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
    std::vector<float> bias;
    if (bias_w) bias = to_floats(*bias_w, n_exp);
    const int64_t per_group = grouped ? n_exp / n_groups : n_exp;
    const size_t n_e = static_cast<size_t>(n_exp), n_g = static_cast<size_t>(std::max(1, n_groups));
    std::vector<float> probs(n_e), sel(n_e), group_score(n_g);
    std::vector<int32_t> idx(n_e), gidx(n_g);
    auto better = [](const std::vector<float>& s) {
        return [&s](int32_t a, int32_t b) { return s[size_t(a)] > s[size_t(b)] || (s[size_t(a)] == s[size_t(b)] && a < b); };
    };
    prepare_margins(logits.rows);
    for (int64_t t = 0; t < logits.rows; ++t) {
        const float* l = logits.data + t * n_exp;
        for (int64_t e = 0; e < n_exp; ++e) {
            probs[size_t(e)] = 1.0f / (1.0f + std::exp(-l[e]));
            sel[size_t(e)] = bias_w ? probs[size_t(e)] + bias[size_t(e)] : probs[size_t(e)];
        }
        if (grouped) {
            // A group's score is the sum of its two best biased scores (one
            // when a group holds a single expert); experts outside the best
            // groups cannot be chosen.
            for (int g = 0; g < n_groups; ++g) {
                const float* s = sel.data() + int64_t(g) * per_group;
                float a = -INFINITY, b = -INFINITY;
                for (int64_t i = 0; i < per_group; ++i) {
                    if (s[i] > a) {
                        b = a;
                        a = s[i];
                    } else if (s[i] > b) {
                        b = s[i];
                    }
                }
                group_score[size_t(g)] = per_group > 1 ? a + b : a;
            }
            std::iota(gidx.begin(), gidx.end(), 0);
            std::partial_sort(gidx.begin(), gidx.begin() + n_group_used, gidx.end(), better(group_score));
            note_selection(t, group_score.data(), gidx.data(), n_groups, n_group_used);
            std::vector<bool> keep(size_t(n_groups), false);
            for (int g = 0; g < n_group_used; ++g) keep[size_t(gidx[size_t(g)])] = true;
            for (int64_t e = 0; e < n_exp; ++e)
                if (!keep[size_t(e / per_group)]) sel[size_t(e)] = -INFINITY;
        }
        std::iota(idx.begin(), idx.end(), 0);
        std::partial_sort(idx.begin(), idx.begin() + n_used, idx.end(), better(sel));
        note_selection(t, sel.data(), idx.data(), n_exp, n_used);
        int32_t* chosen = r.experts.data + t * n_used;
        float* w = r.weights.data + t * n_used;
        double wsum = 0.0;  // ggml_sum_rows sums in double
        for (int j = 0; j < n_used; ++j) {
            chosen[j] = idx[size_t(j)];
            w[j] = probs[size_t(idx[size_t(j)])];
            wsum += w[j];
        }
        const float denom = std::max(static_cast<float>(wsum), 6.103515625e-5f);
        for (int j = 0; j < n_used; ++j) {
            if (norm) w[j] /= denom;
            if (w_scale != 0.0f && w_scale != 1.0f) w[j] *= w_scale;
        }
    }
    return r;
}

void CpuBackend::attention_latent(const Tensor& q_lat, const Tensor& q_pe, const Tensor& latent, const Tensor& pe,
                                  const RowSets& rows, int n_head, float scale, Tensor& out) {
    const int64_t d_lat = q_lat.cols / n_head, d_pe = q_pe.cols / n_head;
    if (q_lat.cols != n_head * d_lat || q_pe.cols != n_head * d_pe || latent.cols != d_lat || pe.cols != d_pe ||
        pe.rows != latent.rows || out.cols != q_lat.cols || q_pe.rows != q_lat.rows)
        throw Error("latent attention: queries of " + std::to_string(q_lat.cols) + " + " +
                    std::to_string(q_pe.cols) + " values do not fit " + std::to_string(n_head) +
                    " heads over cache rows of " + std::to_string(latent.cols) + " + " + std::to_string(pe.cols) +
                    ".");
    for (int64_t t = 0; t < q_lat.rows; ++t) {
        const int64_t c = rows.count.data[t];
        if (c < 0 || c > rows.cap) throw Error("latent attention: row " + std::to_string(t) + " lists " +
                                               std::to_string(c) + " cache rows.");
        for (int64_t j = 0; j < c; ++j)
            if (const int64_t r = rows.at(t, j); r < 0 || r >= latent.rows)
                throw Error("latent attention asks for cache row " + std::to_string(r) + " of " +
                            std::to_string(latent.rows) + ".");
    }
    pool_.parallel_for(q_lat.rows * n_head, 1, [&](int64_t b, int64_t e) {
        std::vector<float> scores;
        std::vector<double> acc(static_cast<size_t>(d_lat));
        for (int64_t job = b; job < e; ++job) {
            const int64_t t = job / n_head, h = job % n_head;
            const int64_t n = rows.count.data[t];
            const float* ql = q_lat.data + t * q_lat.cols + h * d_lat;
            const float* qp = q_pe.data + t * q_pe.cols + h * d_pe;
            scores.resize(static_cast<size_t>(n));
            float mx = -INFINITY;
            for (int64_t j = 0; j < n; ++j) {
                const int64_t r = rows.at(t, j);
                const float* kl = latent.data + r * d_lat;
                const float* kp = pe.data + r * d_pe;
                float s = 0.0f;
                for (int64_t d = 0; d < d_lat; ++d) s += ql[d] * kl[d];
                for (int64_t d = 0; d < d_pe; ++d) s += qp[d] * kp[d];
                scores[size_t(j)] = s * scale;
                mx = std::max(mx, scores[size_t(j)]);
            }
            double sum = 0.0;
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int64_t j = 0; j < n; ++j) {
                const float w = std::exp(scores[size_t(j)] - mx);
                sum += w;
                const float* v = latent.data + rows.at(t, j) * d_lat;
                for (int64_t d = 0; d < d_lat; ++d) acc[size_t(d)] += static_cast<double>(w) * v[d];
            }
            float* o = out.data + t * out.cols + h * d_lat;
            for (int64_t d = 0; d < d_lat; ++d) o[d] = n > 0 ? static_cast<float>(acc[size_t(d)] / sum) : 0.0f;
        }
    });
}

}  // namespace ds4

// Routing and the routed-expert FFN on CUDA, for both families. Decode-sized
// batches stay on the device end to end (moe_decode.cu: five launches per
// layer, only the chosen experts' rows read, nothing back to the host);
// prefill-sized ones group the (token, slot) pairs by expert on the host and
// run each chosen expert's matrices once over its tokens.
#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "common/error.h"

namespace ds4 {

namespace {

// (token, slot) pairs the device path takes at once: the pair index is a
// grid dimension, and beyond a few tokens reading each expert once per
// batch (grouped path) beats reading it once per pair.
constexpr int64_t kMaxDevicePairs = 64;

}  // namespace

Routing CudaBackend::route_sqrt_softplus(const Tensor& logits, const WeightRef* bias, const int32_t* forced,
                                         int n_used, bool norm, float w_scale) {
    Routing r = new_routing(logits.rows, n_used);
    std::shared_ptr<void> keep_bias, d_forced;
    const float* b = bias ? weight_vector(*bias, logits.cols, keep_bias) : nullptr;
    if (forced) {
        for (int64_t i = 0; i < logits.rows * n_used; ++i)
            if (forced[i] < 0 || forced[i] >= logits.cols)
                throw Error("hash routing names expert " + std::to_string(forced[i]) + " of " +
                            std::to_string(logits.cols) + ".");
        d_forced = upload_array(forced, size_t(logits.rows * n_used));
    }
    cuda::route_topk(cuda::RouteScore::SqrtSoftplus, logits.data, logits.rows, int(logits.cols), n_used, b,
                     static_cast<const int32_t*>(d_forced.get()), norm, w_scale, r.experts.data, r.weights.data,
                     stream_);
    return r;
}

void CudaBackend::moe_swiglu_clamp(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                                   const WeightRef& down, float limit, Tensor& out) {
    moe_ffn(x, routing, gate, up, down, nullptr, nullptr, nullptr, limit, out);
}

void CudaBackend::moe_ffn(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                          const WeightRef& down, const WeightRef* gate_scale, const WeightRef* up_scale,
                          const WeightRef* down_scale, float limit, Tensor& out) {
    const int64_t n_exp = gate.ne[2], n_ff = gate.ne[1], n_embd = x.cols;
    const int64_t pairs = x.rows * routing.n_used;
    if (x.rows <= 0) return;
    if (routing.rows != x.rows) throw Error("CUDA MoE: routing rows do not match the tokens.");
    const bool on_device = pairs <= kMaxDevicePairs && cuda::expert_matvec_supported(gate.type, gate.ne[0]) &&
                           cuda::expert_matvec_supported(up.type, up.ne[0]) &&
                           cuda::expert_matvec_supported(down.type, down.ne[0]);
    if (!on_device) {
        moe_ffn_grouped(x, routing, gate, up, down, gate_scale, up_scale, down_scale, limit, out);
        return;
    }
    const uint8_t* g_w = device_ptr(gate.data, gate.matrix_bytes * size_t(n_exp), gate.name);
    const uint8_t* u_w = device_ptr(up.data, up.matrix_bytes * size_t(n_exp), up.name);
    const uint8_t* d_w = device_ptr(down.data, down.matrix_bytes * size_t(n_exp), down.name);
    std::shared_ptr<void> k_gs, k_us, k_ds;
    auto scale_of = [&](const WeightRef* s, std::shared_ptr<void>& keep, int64_t& n) -> const float* {
        n = s ? s->ne[0] : 0;
        return s ? weight_vector(*s, n, keep) : nullptr;
    };
    int64_t n_gs = 0, n_us = 0, n_ds = 0;
    const float* gs = scale_of(gate_scale, k_gs, n_gs);
    const float* us = scale_of(up_scale, k_us, n_us);
    const float* ds = scale_of(down_scale, k_ds, n_ds);

    Tensor g = alloc(pairs, n_ff), u = alloc(pairs, n_ff), d = alloc(pairs, n_embd);
    const int32_t* experts = routing.experts.data;
    cuda::expert_matvec(gate.type, g_w, gate.matrix_bytes, gate.row_bytes, gate.ne[0], n_ff, experts, pairs,
                        routing.n_used, x.data, x.cols, g.data, n_ff, stream_);
    cuda::expert_matvec(up.type, u_w, up.matrix_bytes, up.row_bytes, up.ne[0], n_ff, experts, pairs, routing.n_used,
                        x.data, x.cols, u.data, n_ff, stream_);
    cuda::expert_swiglu(g.data, u.data, experts, pairs, n_ff, gs, n_gs, us, n_us, limit, g.data, stream_);
    cuda::expert_matvec(down.type, d_w, down.matrix_bytes, down.row_bytes, down.ne[0], n_embd, experts, pairs, 1,
                        g.data, n_ff, d.data, n_embd, stream_);
    cuda::expert_combine(d.data, experts, routing.weights.data, ds, n_ds, x.rows, routing.n_used, n_embd, out.data,
                         stream_);
}

void CudaBackend::moe_ffn_grouped(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                                  const WeightRef& down, const WeightRef* gate_scale, const WeightRef* up_scale,
                                  const WeightRef* down_scale, float limit, Tensor& out) {
    const int64_t n_exp = gate.ne[2], n_ff = gate.ne[1], n_embd = x.cols;
    const int n_used = routing.n_used;
    const int64_t pairs = x.rows * n_used;
    // The grouping needs the choices on the host: one synchronisation per
    // layer, acceptable for prefill (never recorded).
    std::vector<int32_t> experts(static_cast<size_t>(pairs));
    download_ints(routing.experts, experts.data());
    std::vector<std::vector<int64_t>> by_expert(static_cast<size_t>(n_exp));
    for (int64_t s = 0; s < pairs; ++s) {
        const int32_t e = experts[size_t(s)];
        if (e < 0 || e >= n_exp)
            throw Error("routing chose expert " + std::to_string(e) + " of " + std::to_string(n_exp) + ".");
        by_expert[size_t(e)].push_back(s);
    }
    // Pair order expert by expert; each pair's output goes to its own row of
    // slot_out, summed per token in slot order afterwards (as on the CPU).
    std::vector<int32_t> rows, slots;
    std::vector<int64_t> begin(size_t(n_exp) + 1, 0);
    int64_t max_m = 0;
    for (int64_t e = 0; e < n_exp; ++e) {
        begin[size_t(e)] = int64_t(rows.size());
        for (int64_t s : by_expert[size_t(e)]) {
            rows.push_back(int32_t(s / n_used));
            slots.push_back(int32_t(s));
        }
        max_m = std::max<int64_t>(max_m, int64_t(by_expert[size_t(e)].size()));
    }
    begin[size_t(n_exp)] = int64_t(rows.size());
    auto d_rows = upload_array(rows.data(), rows.size());
    auto d_slots = upload_array(slots.data(), slots.size());
    auto expert_scale = [](const WeightRef* s, int64_t e) {
        if (!s) return 1.0f;
        const float* v = reinterpret_cast<const float*>(s->data);  // host copy, as the CPU reads it
        return s->ne[0] > 1 ? v[e] : v[0];
    };
    Tensor xs_all = alloc(max_m, n_embd), g_all = alloc(max_m, n_ff), u_all = alloc(max_m, n_ff),
           d_all = alloc(max_m, n_embd), slot_out = alloc(pairs, n_embd);
    for (int64_t e = 0; e < n_exp; ++e) {
        const int64_t m = begin[size_t(e) + 1] - begin[size_t(e)];
        if (m == 0) continue;
        Tensor xs = xs_all.row_view(0, m), g = g_all.row_view(0, m), u = u_all.row_view(0, m),
               d = d_all.row_view(0, m);
        const int32_t* er = static_cast<const int32_t*>(d_rows.get()) + begin[size_t(e)];
        const int32_t* es = static_cast<const int32_t*>(d_slots.get()) + begin[size_t(e)];
        cuda::gather_rows(x.data, n_embd, er, m, xs.data, stream_);
        matmul(gate, xs, g, e);
        matmul(up, xs, u, e);
        if (gate_scale) scale(g, expert_scale(gate_scale, e));
        if (up_scale) scale(u, expert_scale(up_scale, e));
        cuda::expert_swiglu(g.data, u.data, nullptr, m, n_ff, nullptr, 0, nullptr, 0, limit, g.data, stream_);
        matmul(down, g, d, e);
        cuda::scatter_rows(d.data, n_embd, es, m, slot_out.data, stream_);  // slot_out[slot] = expert output
    }
    // Weights and down scales per slot, summed per token in slot order.
    std::shared_ptr<void> keep_ds;
    const float* ds = down_scale ? weight_vector(*down_scale, down_scale->ne[0], keep_ds) : nullptr;
    cuda::expert_combine(slot_out.data, routing.experts.data, routing.weights.data, ds, down_scale ? down_scale->ne[0] : 0,
                         x.rows, n_used, n_embd, out.data, stream_);
}

}  // namespace ds4

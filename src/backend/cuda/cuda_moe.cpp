// Routing and the routed-expert FFN on CUDA, for both families. Decode-sized
// batches stay on the device end to end (moe_decode.cu: two launches per
// layer, or five where the fused kernels do not apply; moe_grouped.cu: three
// for a batch of many sequences, each chosen expert read once for all its
// pairs; only the chosen experts' rows read, nothing back to the host);
// prefill-sized ones group the (token, slot) pairs by expert on the host and
// run each chosen expert's matrices once over its tokens.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cublas_library.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/env_switch.h"
#include "backend/cuda/op_knockout.h"
#include "common/error.h"

namespace ds4 {

namespace {

// (token, slot) pairs the device path takes at once. It reads each chosen
// expert once per pair; the grouped path reads each expert once per batch
// but decodes whole experts to float for cuBLAS (8x the bytes of a 4-bit
// expert, written and read again) and needs the choices on the host, so it
// cannot be recorded. Up to 512 pairs (64 decode rows of 8 experts) the
// device path wins and keeps batched decode steps recordable: measured on
// the H200, 16 and 32 decode rows (128 and 256 pairs) went to the grouped
// path under the old limit of 64 and could not be recorded.
constexpr int64_t kMaxDevicePairs = 512;
// DS4_CUDA_MOE_DEVICE_PAIRS=N moves that limit (A/B), read once. The grouped
// path on the tensor cores (a 64-row tile per expert, ~2 pairs each at 32
// decode rows) lost to the device path on an H100 (2026-12-06, Qwen3-30B-A3B
// q4_k_m, ctx 512): 8 rows 319 vs 804 t/s, 16: 419 vs 938, 32: 576 vs 1014.
int64_t max_device_pairs() {
    static const int64_t n = std::max<int64_t>(0, cuda::env_int("DS4_CUDA_MOE_DEVICE_PAIRS", kMaxDevicePairs));
    return n;
}

// Expert matrices decoded to float at once for a grouped GEMM (1 GiB): all
// 128 experts of one Qwen3-30B-A3B matrix kind fit; larger models batch.
constexpr size_t kGroupedGemmFloats = size_t(1) << 28;

// DS4_CUDA_MOE_FUSED=0 keeps decode on the five-launch path: an A/B switch for
// benchmarks and for comparing the two paths' rounding on the device, read once.
bool fused_moe_enabled() {
    static const bool on = cuda::env_switch("DS4_CUDA_MOE_FUSED", true);
    return on;
}

// Whether a decode batch of `pairs` (token, slot) pairs over n_exp experts
// runs grouped by expert. Grouping saves a weight read and decode for every
// pair beyond the first of its expert. With at least as many pairs as
// experts a block column is an expert; with fewer, each block first finds
// which expert its column serves (a scan of the routing), and that cost more
// than it saved. Measured on the H200 with uniform routing over 128 experts
// (2026-12-02, Qwen3-30B-A3B q4_k_m, aggregate decode t/s, grouped vs per
// pair): 8 sequences 370 vs 405 (with the scan), 16: 439 vs 423, 32: 464 vs
// 414, 64: 454 vs 418. DS4_CUDA_MOE_GROUPED=0 / 1: never / every batch of
// two or more tokens (A/B and tests), read once.
bool grouped_moe_wanted(int64_t rows, int64_t pairs, int64_t n_exp) {
    static const int mode = [] {
        const long long v = cuda::env_int("DS4_CUDA_MOE_GROUPED", 2);
        return v == 0 || v == 1 ? int(v) : 2;
    }();
    if (rows < 2 || mode == 0) return false;
    return mode == 1 || pairs >= n_exp;
}

// Whether decode on exact (float-mode) activations runs the split pair
// (moe_split.cu) where its types allow: every decode batch size alike, so
// a token's output does not depend on its batch. DS4_CUDA_MOE_SPLIT=0 keeps
// the float kernels (A/B and tests), read once.
bool split_moe_enabled() {
    static const bool on = cuda::env_switch("DS4_CUDA_MOE_SPLIT", true);
    return on;
}

// Whether exact decode runs the routed experts on the tensor cores
// (moe_split_mma.cu) where the types allow: opt-in (DS4_CUDA_MOE_MMA=1),
// read once. Its first version lost to the per-pair split kernels (H100,
// 2026-12-06, Qwen3-30B-A3B q4_k_m, ctx 512: 1 sequence 234 vs 262 t/s, 8:
// 623 vs 837); bench/NOTES.md says where its time goes.
bool moe_mma_enabled() {
    static const bool on = cuda::env_switch("DS4_CUDA_MOE_MMA", false);
    return on;
}

// Tokens from which the tensor-core experts group a batch's pairs by expert
// (moe_tile_list, one more launch); below, each pair is a tile. The values
// are the same either way. DS4_CUDA_MOE_MMA_GROUP_FROM=N moves it (A/B),
// read once.
int64_t moe_mma_group_from() {
    static const int64_t n = std::max<int64_t>(1, cuda::env_int("DS4_CUDA_MOE_MMA_GROUP_FROM", 2));
    return n;
}

}  // namespace

Routing CudaBackend::route_sqrt_softplus(const Tensor& logits, const WeightRef* bias, const WeightRef* hash,
                                         const IntArray* tokens, int n_used, bool norm, float w_scale) {
    if (hash && (!tokens || tokens->n < logits.rows || hash->ne[0] != n_used))
        throw Error("hash routing needs a token per row and a table of " + std::to_string(n_used) +
                    " experts per token.");
    Routing r = new_routing(logits.rows, n_used);
    std::shared_ptr<void> keep_bias;
    const float* b = bias ? weight_vector(*bias, logits.cols, keep_bias) : nullptr;
    // The table's ids were checked when the model loaded; token ids by the session.
    const int32_t* table =
        hash ? reinterpret_cast<const int32_t*>(device_ptr(hash->data, hash->matrix_bytes, hash->name)) : nullptr;
    cuda::route_topk(cuda::RouteScore::SqrtSoftplus, logits.data, logits.rows, int(logits.cols), n_used, b, table,
                     hash ? tokens->data : nullptr, norm, w_scale, r.experts.data, r.weights.data, stream_);
    return r;
}

void CudaBackend::moe_swiglu_clamp(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                                   const WeightRef& down, float limit, Tensor& out) {
    moe_ffn(x, routing, gate, up, down, nullptr, nullptr, nullptr, limit, out);
}

CudaBackend::ExpertScales CudaBackend::expert_scales(const WeightRef* gate, const WeightRef* up,
                                                     const WeightRef* down) {
    ExpertScales sc;
    auto one = [&](const WeightRef* w, std::shared_ptr<void>& keep, int64_t& n) -> const float* {
        n = w ? w->ne[0] : 0;
        return w ? weight_vector(*w, n, keep) : nullptr;
    };
    sc.gate = one(gate, sc.keep[0], sc.n_gate);
    sc.up = one(up, sc.keep[1], sc.n_up);
    sc.down = one(down, sc.keep[2], sc.n_down);
    return sc;
}

void CudaBackend::moe_ffn(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                          const WeightRef& down, const WeightRef* gate_scale, const WeightRef* up_scale,
                          const WeightRef* down_scale, float limit, Tensor& out) {
    const int64_t n_exp = gate.ne[2], n_ff = gate.ne[1], n_embd = x.cols;
    const int64_t pairs = x.rows * routing.n_used;
    if (x.rows <= 0) return;
    if (routing.rows != x.rows) throw Error("CUDA MoE: routing rows do not match the tokens.");
    if (cuda::knocked_out("moe")) {
        knock_out(out.data, out.size());
        return;
    }
    auto supported = [](const WeightRef& w) { return cuda::expert_matvec_supported(w.type, w.ne[0]); };
    if (pairs > max_device_pairs() || !supported(gate) || !supported(up) || !supported(down)) {
        moe_ffn_grouped(x, routing, gate, up, down, gate_scale, up_scale, down_scale, limit, out);
        return;
    }
    const uint8_t* g_w = device_ptr(gate.data, gate.matrix_bytes * size_t(n_exp), gate.name);
    const uint8_t* u_w = device_ptr(up.data, up.matrix_bytes * size_t(n_exp), up.name);
    const uint8_t* d_w = device_ptr(down.data, down.matrix_bytes * size_t(n_exp), down.name);
    const ExpertScales sc = expert_scales(gate_scale, up_scale, down_scale);
    std::optional<cuda::OpProfile::Scope> t;
    const int32_t* experts = routing.experts.data;
    // The chosen experts' matrices on their way to L2 (l2_ahead.h): gate and
    // up beside the kernel that reads them, down while they are computed.
    if (capturing_ && cuda::L2Ahead::enabled()) {
        auto ahead = [&](const WeightRef& w) {
            if (const uint8_t* dev = device_copy(w.data, w.matrix_bytes * uint64_t(n_exp)))
                l2_ahead_.matrices(stream_, dev, w.matrix_bytes, experts, int(pairs));
        };
        if (cuda::L2Ahead::level() >= 2) {
            ahead(gate);
            ahead(up);
        }
        ahead(down);
    }

    // Both fused decode paths: gate and up alike, down from n_ff back to n_embd.
    const bool fused_shapes = up.matrix_bytes == gate.matrix_bytes && up.row_bytes == gate.row_bytes &&
                              gate.ne[0] == n_embd && down.ne[0] == n_ff && down.ne[1] == n_embd && out.cols == n_embd;
    // Decode on int8 activations: x quantized once, gate + up + SwiGLU, h
    // quantized, down + weighted combine (four launches).
    if (int8_activations_ && fused_moe_enabled() &&
        cuda::expert_q8_supported(gate.type, up.type, down.type, g_w, u_w, d_w, gate.matrix_bytes, gate.row_bytes,
                                  down.matrix_bytes, down.row_bytes, n_embd, n_ff, routing.n_used, pairs, x.data,
                                  x.cols) &&
        fused_shapes) {
        Tensor xq = alloc(x.rows, cuda::q8_activation_bytes(n_embd) / 4), h = alloc(pairs, n_ff),
               hq = alloc(pairs, cuda::q8_activation_bytes(n_ff) / 4);
        if (grouped_moe_wanted(x.rows, pairs, n_exp) && cuda::expert_grouped_supported(n_exp, pairs)) {
            // A batch grouped by expert, as the float path below.
            Tensor d = alloc(pairs, n_embd);
            t.emplace(timed("moe gate+up+swiglu q8 grouped", ggml_type_name(gate.type),
                            (gate.matrix_bytes + up.matrix_bytes) * uint64_t(pairs)));
            cuda::quantize_rows_q8(x.data, x.cols, x.rows, n_embd, reinterpret_cast<int8_t*>(xq.data), stream_);
            cuda::expert_gate_up_swiglu_grouped_q8(gate.type, g_w, u_w, gate.matrix_bytes, gate.row_bytes, n_embd,
                                                   n_ff, n_exp, experts, pairs, routing.n_used,
                                                   reinterpret_cast<const int8_t*>(xq.data), sc.gate, sc.n_gate, sc.up,
                                                   sc.n_up, limit, h.data, stream_);
            t.reset();
            t.emplace(timed("moe down q8 grouped+combine", ggml_type_name(down.type),
                            down.matrix_bytes * uint64_t(pairs)));
            cuda::quantize_rows_q8(h.data, n_ff, pairs, n_ff, reinterpret_cast<int8_t*>(hq.data), stream_);
            cuda::expert_down_grouped_q8(down.type, d_w, down.matrix_bytes, down.row_bytes, n_ff, n_embd, n_exp,
                                         experts, pairs, reinterpret_cast<const int8_t*>(hq.data), d.data, stream_);
            cuda::expert_combine(d.data, experts, routing.weights.data, sc.down, sc.n_down, x.rows, routing.n_used,
                                 n_embd, out.data, stream_);
            return;
        }
        t.emplace(timed("moe gate+up+swiglu q8", ggml_type_name(gate.type),
                        (gate.matrix_bytes + up.matrix_bytes) * uint64_t(pairs)));
        cuda::quantize_rows_q8(x.data, x.cols, x.rows, n_embd, reinterpret_cast<int8_t*>(xq.data), stream_);
        cuda::expert_gate_up_swiglu_q8(gate.type, g_w, u_w, gate.matrix_bytes, gate.row_bytes, n_embd, n_ff, experts,
                                       pairs, routing.n_used, reinterpret_cast<const int8_t*>(xq.data), sc.gate,
                                       sc.n_gate, sc.up, sc.n_up, limit, h.data, stream_);
        t.reset();
        t.emplace(timed("moe down+combine q8", ggml_type_name(down.type), down.matrix_bytes * uint64_t(pairs)));
        cuda::quantize_rows_q8(h.data, n_ff, pairs, n_ff, reinterpret_cast<int8_t*>(hq.data), stream_);
        cuda::expert_down_combine_q8(down.type, d_w, down.matrix_bytes, down.row_bytes, n_ff, n_embd, experts,
                                     routing.weights.data, sc.down, sc.n_down, x.rows, routing.n_used,
                                     reinterpret_cast<const int8_t*>(hq.data), out.data, stream_);
        return;
    }
    const bool fused = fused_moe_enabled() && fused_shapes &&
                       cuda::expert_fused_supported(gate.type, up.type, down.type, g_w, u_w, d_w, gate.matrix_bytes,
                                                    gate.row_bytes, down.matrix_bytes, down.row_bytes, n_embd, n_ff,
                                                    routing.n_used, pairs, x.data, x.cols);
    // Exact decode on the int8 tensor cores (moe_split_mma.cu): x split once;
    // a batch of two or more tokens grouped by expert on the device (each
    // chosen expert read once), one token's pairs each a tile of their own
    // (the grouping would cost a launch and save nothing); gate and up in
    // one launch, SwiGLU + split of h, down, weighted combine.
    const bool mma = !int8_activations_ && split_moe_enabled() && moe_mma_enabled() && fused_shapes &&
                     gate.type == up.type && n_exp <= cuda::kMoeTileMaxExperts &&
                     reinterpret_cast<uintptr_t>(x.data) % 16 == 0 && x.cols % 4 == 0 &&
                     cuda::expert_mma_supported(gate.type, g_w, gate.matrix_bytes, gate.row_bytes, n_embd) &&
                     cuda::expert_mma_supported(up.type, u_w, up.matrix_bytes, up.row_bytes, n_embd) &&
                     cuda::expert_mma_supported(down.type, d_w, down.matrix_bytes, down.row_bytes, n_ff);
    if (mma) {
        Tensor xs = alloc(x.rows, cuda::split_activation_bytes(n_embd) / 4), gu = alloc(pairs, 2 * n_ff),
               hs = alloc(pairs, cuda::split_activation_bytes(n_ff) / 4), d = alloc(pairs, n_embd);
        const int32_t* tiles = nullptr;
        const int32_t* pair_of_row = nullptr;
        int64_t n_tiles = 0;
        IntArray tok, pr, er, tl;
        t.emplace(timed("moe gate+up mma", ggml_type_name(gate.type),
                        (gate.matrix_bytes + up.matrix_bytes) * uint64_t(pairs)));
        cuda::quantize_rows_split(x.data, x.cols, x.rows, n_embd, reinterpret_cast<int8_t*>(xs.data), stream_);
        if (x.rows >= moe_mma_group_from()) {
            n_tiles = cuda::moe_max_tiles(pairs, n_exp);
            tok = alloc_ints(pairs), pr = alloc_ints(pairs), er = alloc_ints(pairs), tl = alloc_ints(3 * n_tiles);
            cuda::moe_tile_list(experts, pairs, n_exp, routing.n_used, tok.data, pr.data, er.data, tl.data, stream_);
            tiles = tl.data, pair_of_row = pr.data;
        }
        cuda::expert_products_split_mma(gate.type, g_w, u_w, gate.matrix_bytes, gate.row_bytes, n_embd, n_ff, n_exp,
                                        tiles, n_tiles, pair_of_row, experts, pairs, routing.n_used,
                                        reinterpret_cast<const int8_t*>(xs.data), gu.data, 2 * n_ff, stream_);
        t.reset();
        t.emplace(timed("moe down mma+combine", ggml_type_name(down.type), down.matrix_bytes * uint64_t(pairs)));
        cuda::expert_swiglu_split(gu.data, n_ff, experts, n_exp, pairs, sc.gate, sc.n_gate, sc.up, sc.n_up, limit,
                                  reinterpret_cast<int8_t*>(hs.data), stream_);
        cuda::expert_products_split_mma(down.type, d_w, nullptr, down.matrix_bytes, down.row_bytes, n_ff, n_embd,
                                        n_exp, tiles, n_tiles, pair_of_row, experts, pairs, 1,
                                        reinterpret_cast<const int8_t*>(hs.data), d.data, n_embd, stream_);
        cuda::expert_combine(d.data, experts, routing.weights.data, sc.down, sc.n_down, x.rows, routing.n_used, n_embd,
                             out.data, stream_);
        return;
    }
    // Exact decode on split activations (moe_split.cu): x split once, gate + up
    // + SwiGLU, then for a Q4_K down h split and down + weighted combine, for
    // another down the float kernel on h (as below).
    const bool split_gate_up =
        !int8_activations_ && split_moe_enabled() && fused_moe_enabled() && fused_shapes &&
        cuda::expert_split_gate_up_supported(gate.type, up.type, g_w, u_w, gate.matrix_bytes, gate.row_bytes, n_embd,
                                             pairs, x.data, x.cols);
    const bool split_down = split_gate_up && cuda::expert_split_down_supported(down.type, d_w, down.matrix_bytes,
                                                                                down.row_bytes, n_ff, routing.n_used);
    if (split_gate_up && (split_down || fused)) {
        Tensor xs = alloc(x.rows, cuda::split_activation_bytes(n_embd) / 4), h = alloc(pairs, n_ff);
        t.emplace(timed("moe gate+up+swiglu split", ggml_type_name(gate.type),
                        (gate.matrix_bytes + up.matrix_bytes) * uint64_t(pairs)));
        cuda::quantize_rows_split(x.data, x.cols, x.rows, n_embd, reinterpret_cast<int8_t*>(xs.data), stream_);
        cuda::expert_gate_up_swiglu_split(g_w, u_w, gate.matrix_bytes, gate.row_bytes, n_embd, n_ff, experts, pairs,
                                          routing.n_used, reinterpret_cast<const int8_t*>(xs.data), sc.gate,
                                          sc.n_gate, sc.up, sc.n_up, limit, h.data, stream_);
        t.reset();
        if (split_down) {
            Tensor hs = alloc(pairs, cuda::split_activation_bytes(n_ff) / 4);
            t.emplace(timed("moe down+combine split", ggml_type_name(down.type), down.matrix_bytes * uint64_t(pairs)));
            cuda::quantize_rows_split(h.data, n_ff, pairs, n_ff, reinterpret_cast<int8_t*>(hs.data), stream_);
            cuda::expert_down_combine_split(d_w, down.matrix_bytes, down.row_bytes, n_ff, n_embd, experts,
                                            routing.weights.data, sc.down, sc.n_down, x.rows, routing.n_used,
                                            reinterpret_cast<const int8_t*>(hs.data), out.data, stream_);
        } else {
            t.emplace(timed("moe down+combine", ggml_type_name(down.type), down.matrix_bytes * uint64_t(pairs)));
            cuda::expert_down_combine(down.type, d_w, down.matrix_bytes, down.row_bytes, n_ff, n_embd, experts,
                                      routing.weights.data, sc.down, sc.n_down, x.rows, routing.n_used, h.data,
                                      out.data, stream_);
        }
        return;
    }
    // A batch of several tokens, grouped by expert: each chosen expert read
    // once for every pair that chose it (gate + up + SwiGLU, down, combine).
    if (fused && grouped_moe_wanted(x.rows, pairs, n_exp) && cuda::expert_grouped_supported(n_exp, pairs)) {
        Tensor h = alloc(pairs, n_ff), d = alloc(pairs, n_embd);
        t.emplace(timed("moe gate+up+swiglu grouped", ggml_type_name(gate.type),
                        (gate.matrix_bytes + up.matrix_bytes) * uint64_t(pairs)));
        cuda::expert_gate_up_swiglu_grouped(gate.type, g_w, u_w, gate.matrix_bytes, gate.row_bytes, n_embd, n_ff,
                                            n_exp, experts, pairs, routing.n_used, x.data, x.cols, sc.gate, sc.n_gate,
                                            sc.up, sc.n_up, limit, h.data, stream_);
        t.reset();
        t.emplace(timed("moe down grouped+combine", ggml_type_name(down.type), down.matrix_bytes * uint64_t(pairs)));
        cuda::expert_down_grouped(down.type, d_w, down.matrix_bytes, down.row_bytes, n_ff, n_embd, n_exp, experts,
                                  pairs, h.data, d.data, stream_);
        cuda::expert_combine(d.data, experts, routing.weights.data, sc.down, sc.n_down, x.rows, routing.n_used, n_embd,
                             out.data, stream_);
        return;
    }
    // Decode, fused: gate + up + SwiGLU in one launch, down + weighted combine in another.
    if (fused) {
        Tensor h = alloc(pairs, n_ff);
        t.emplace(timed("moe gate+up+swiglu", ggml_type_name(gate.type),
                        (gate.matrix_bytes + up.matrix_bytes) * uint64_t(pairs)));
        cuda::expert_gate_up_swiglu(gate.type, g_w, u_w, gate.matrix_bytes, gate.row_bytes, gate.ne[0], n_ff, experts,
                                    pairs, routing.n_used, x.data, x.cols, sc.gate, sc.n_gate, sc.up, sc.n_up, limit,
                                    h.data, stream_);
        t.reset();
        t.emplace(timed("moe down+combine", ggml_type_name(down.type), down.matrix_bytes * uint64_t(pairs)));
        cuda::expert_down_combine(down.type, d_w, down.matrix_bytes, down.row_bytes, n_ff, n_embd, experts,
                                  routing.weights.data, sc.down, sc.n_down, x.rows, routing.n_used, h.data, out.data,
                                  stream_);
        return;
    }
    Tensor g = alloc(pairs, n_ff), u = alloc(pairs, n_ff), d = alloc(pairs, n_embd);

    // Decode, five launches: one (token, slot) pair per block row, choices read on the device.
    t.emplace(timed("moe gate", ggml_type_name(gate.type), gate.matrix_bytes * uint64_t(pairs)));
    cuda::expert_matvec(gate.type, g_w, gate.matrix_bytes, gate.row_bytes, gate.ne[0], n_ff, experts, pairs,
                        routing.n_used, x.data, x.cols, g.data, n_ff, stream_);
    t.reset();
    t.emplace(timed("moe up", ggml_type_name(up.type), up.matrix_bytes * uint64_t(pairs)));
    cuda::expert_matvec(up.type, u_w, up.matrix_bytes, up.row_bytes, up.ne[0], n_ff, experts, pairs,
                        routing.n_used, x.data, x.cols, u.data, n_ff, stream_);
    t.reset();
    t.emplace(timed("moe swiglu"));
    cuda::expert_swiglu(g.data, u.data, experts, pairs, n_ff, sc.gate, sc.n_gate, sc.up, sc.n_up, limit, g.data,
                        stream_);
    t.reset();
    t.emplace(timed("moe down", ggml_type_name(down.type), down.matrix_bytes * uint64_t(pairs)));
    cuda::expert_matvec(down.type, d_w, down.matrix_bytes, down.row_bytes, down.ne[0], n_embd, experts, pairs, 1,
                        g.data, n_ff, d.data, n_embd, stream_);
    t.reset();
    t.emplace(timed("moe combine"));
    cuda::expert_combine(d.data, experts, routing.weights.data, sc.down, sc.n_down, x.rows, routing.n_used, n_embd,
                         out.data, stream_);
}

// Prefill-sized batches, and experts whose rows the device kernels cannot
// read (rows not made of whole 32-element chunks). The (token, slot) pairs are sorted by expert on the host (one
// synchronisation per layer for the choices); each matrix kind is then one
// grouped GEMM over all chosen experts: on the tensor cores (gemm_f16 over a
// tile list of (expert, rows)), or with --exact decoded to float for cuBLAS
// (grouped_expert_gemm); the pairs' outputs are summed per token in slot
// order, as on the CPU.
void CudaBackend::moe_ffn_grouped(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                                  const WeightRef& down, const WeightRef* gate_scale, const WeightRef* up_scale,
                                  const WeightRef* down_scale, float limit, Tensor& out) {
    const int64_t n_exp = gate.ne[2], n_ff = gate.ne[1], n_embd = x.cols;
    const int n_used = routing.n_used;
    const int64_t pairs = x.rows * n_used;
    const auto t = timed("moe prefill (grouped gemm)");
    const ExpertScales sc = expert_scales(gate_scale, up_scale, down_scale);
    Tensor g = alloc(pairs, n_ff), u = alloc(pairs, n_ff), d = alloc(pairs, n_embd);
    Tensor slot_out = alloc(pairs, n_embd);
    const bool tensor_cores = f16_prefill_ && n_exp <= cuda::kMoeTileMaxExperts &&
                              cuda::gemm_f16_supported(gate.type, gate.ne[0]) &&
                              cuda::gemm_f16_supported(up.type, up.ne[0]) &&
                              cuda::gemm_f16_supported(down.type, down.ne[0]);
    if (tensor_cores) {
        // The rows grouped by expert and the tile list, on the device: no
        // wait for the routing, and a step of any size can be recorded.
        const int64_t max_tiles = cuda::moe_max_tiles(pairs, n_exp);
        IntArray tok = alloc_ints(pairs), pair_of_row = alloc_ints(pairs), exp_of_row = alloc_ints(pairs);
        IntArray tiles = alloc_ints(3 * max_tiles);
        cuda::moe_tile_list(routing.experts.data, pairs, n_exp, n_used, tok.data, pair_of_row.data, exp_of_row.data,
                            tiles.data, stream_);
        // A pair the list drops (an expert id out of range) adds zero.
        cuda::check(cudaMemsetAsync(slot_out.data, 0, sizeof(float) * size_t(pairs * n_embd), stream_),
                    "clearing the MoE pair outputs");
        // Every tile's product of w with the scaled f16 rows.
        auto product = [&](const WeightRef& w, const HalfRows& in, Tensor& y) {
            const uint8_t* base = device_ptr(w.data, w.matrix_bytes * size_t(w.ne[2]), w.name);
            cuda::gemm_f16(w.type, base, w.matrix_bytes, w.row_bytes, w.ne[0], w.ne[1], tiles.data, max_tiles, pairs,
                           in.h, in.ld, in.scale, y.data, y.cols, stream_);
        };
        const HalfRows xh = half_rows(x.data, x.cols, tok.data, pairs, n_embd);  // gate and up read the same rows
        product(gate, xh, g);
        product(up, xh, u);
        cuda::expert_swiglu(g.data, u.data, exp_of_row.data, pairs, n_ff, sc.gate, sc.n_gate, sc.up, sc.n_up, limit,
                            g.data, stream_);
        product(down, half_rows(g.data, g.cols, nullptr, pairs, n_ff), d);
        cuda::scatter_rows(d.data, n_embd, pair_of_row.data, pairs, slot_out.data, stream_);  // slot_out[pair] = its output
    } else {
        // --exact: whole experts decoded to float for cuBLAS, from a list
        // made on the host.
        std::vector<int32_t> experts(static_cast<size_t>(pairs));
        download_ints(routing.experts, experts.data());
        std::vector<std::vector<int32_t>> by_expert(static_cast<size_t>(n_exp));
        for (int64_t p = 0; p < pairs; ++p) {
            const int32_t e = experts[size_t(p)];
            if (e < 0 || e >= n_exp)
                throw Error("routing chose expert " + std::to_string(e) + " of " + std::to_string(n_exp) + ".");
            by_expert[size_t(e)].push_back(int32_t(p));
        }
        ExpertRows rows;
        std::vector<int32_t> token_of_row, pair_of_row, expert_of_row;
        for (int64_t e = 0; e < n_exp; ++e) {
            const auto& ps = by_expert[size_t(e)];
            if (ps.empty()) continue;
            rows.experts.push_back(int32_t(e));
            rows.start.push_back(int64_t(token_of_row.size()));
            rows.count.push_back(int64_t(ps.size()));
            for (int32_t p : ps) {
                token_of_row.push_back(p / n_used);
                pair_of_row.push_back(p);
                expert_of_row.push_back(int32_t(e));
            }
        }
        auto ip = [](const std::shared_ptr<void>& p) { return static_cast<const int32_t*>(p.get()); };
        auto d_tok = upload_array(token_of_row.data(), token_of_row.size());
        auto d_pair = upload_array(pair_of_row.data(), pair_of_row.size());
        auto d_exp = upload_array(expert_of_row.data(), expert_of_row.size());
        Tensor xs = alloc(pairs, n_embd);
        cuda::gather_rows(x.data, n_embd, ip(d_tok), pairs, xs.data, stream_);
        grouped_expert_gemm(gate, rows, xs, g);
        grouped_expert_gemm(up, rows, xs, u);
        cuda::expert_swiglu(g.data, u.data, ip(d_exp), pairs, n_ff, sc.gate, sc.n_gate, sc.up, sc.n_up, limit,
                            g.data, stream_);
        grouped_expert_gemm(down, rows, g, d);
        cuda::scatter_rows(d.data, n_embd, ip(d_pair), pairs, slot_out.data, stream_);  // slot_out[pair] = its output
    }
    cuda::expert_combine(slot_out.data, routing.experts.data, routing.weights.data, sc.down, sc.n_down, x.rows, n_used,
                         n_embd, out.data, stream_);
}

// y rows [start_i, start_i + count_i) = x rows of the same range times expert
// experts_i's matrix of w, for every listed expert: the experts' matrices
// are decoded to float in batches that fit the dequant buffer, and each
// batch is one cuBLAS grouped GEMM (plain FP32, like the dense products).
void CudaBackend::grouped_expert_gemm(const WeightRef& w, const ExpertRows& rows, const Tensor& x, Tensor& y) {
    const int64_t k = w.ne[0], n_out = w.ne[1];
    if (x.cols != k) throw Error("CUDA MoE: '" + w.name + "' has rows of " + std::to_string(k) + " values, the input " +
                                 std::to_string(x.cols) + ".");
    const uint8_t* base = device_ptr(w.data, w.matrix_bytes * size_t(w.ne[2]), w.name);
    const int64_t per_expert = n_out * k;
    const int64_t batch = std::max<int64_t>(1, int64_t(kGroupedGemmFloats) / per_expert);
    const int64_t n_sel = int64_t(rows.experts.size());
    for (int64_t b0 = 0; b0 < n_sel; b0 += batch) {
        const int64_t nb = std::min(batch, n_sel - b0);
        float* wf = dequant_buffer(size_t(nb * per_expert));
        auto d_sel = upload_array(rows.experts.data() + b0, size_t(nb));
        cuda::dequantize_matrices(w.type, base, w.matrix_bytes, w.row_bytes, k, n_out,
                                  static_cast<const int32_t*>(d_sel.get()), nb, wf, stream_);
        const size_t n = static_cast<size_t>(nb);
        std::vector<const float*> a(n), b(n);
        std::vector<float*> c(n);
        std::vector<int> m_arr(n, int(n_out)), n_arr(n), k_arr(n, int(k));
        std::vector<int> lda(n, int(k)), ldb(n, int(x.cols)), ldc(n, int(y.cols));
        std::vector<cublasOperation_t> ta(n, CUBLAS_OP_T), tb(n, CUBLAS_OP_N);
        std::vector<float> alpha(n, 1.0f), beta(n, 0.0f);
        std::vector<int> group_size(n, 1);
        for (int64_t i = 0; i < nb; ++i) {
            const size_t s = size_t(b0 + i);
            a[size_t(i)] = wf + i * per_expert;
            b[size_t(i)] = x.data + rows.start[s] * x.cols;
            c[size_t(i)] = y.data + rows.start[s] * y.cols;
            n_arr[size_t(i)] = int(rows.count[s]);
        }
        // y^T (n_out x count, column-major, ld y.cols) = W_e (row-major) * x^T, as in matmul.
        auto d_a = upload_array(a.data(), a.size());
        auto d_b = upload_array(b.data(), b.size());
        auto d_c = upload_array(c.data(), c.size());
        cuda::check(cuda::cublas().sgemm_grouped_batched(
                        cublas_, ta.data(), tb.data(), m_arr.data(), n_arr.data(), k_arr.data(), alpha.data(),
                        static_cast<const float* const*>(d_a.get()), lda.data(),
                        static_cast<const float* const*>(d_b.get()), ldb.data(), beta.data(),
                        static_cast<float* const*>(d_c.get()), ldc.data(), int(nb), group_size.data()),
                    "cublasSgemmGroupedBatched");
    }
}

}  // namespace ds4

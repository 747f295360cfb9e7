#include "models/deepseek4/dsv4_moe.h"
#include "models/deepseek4/dsv4_ops.h"

namespace ds4 {

namespace {

// Block B's routing of the rows x.
Routing dsv4_route(Backend& be, const Dsv4Hparams& hp, const Dsv4LayerWeights& B, const Tensor& x, const IntArray& tokens) {
    Tensor logits = be.alloc(x.rows, hp.n_expert);
    be.matmul(B.gate_inp, x, logits);
    // Hash layers weight their fixed experts by the unbiased scores.
    const bool hashed = static_cast<bool>(B.tid2eid);
    return dsv4_ops(be).route_sqrt_softplus(logits, hashed ? nullptr : &B.exp_probs_b, hashed ? &B.tid2eid : nullptr,
                                            hashed ? &tokens : nullptr, hp.n_expert_used, hp.expert_weights_norm,
                                            hp.expert_weights_scale);
}

}  // namespace

Tensor dsv4_ffn(Backend& be, const Dsv4Hparams& hp, const Dsv4LayerWeights& L, int layer, const Tensor& x,
                const IntArray& tokens, ExpertSource& experts, const Dsv4LayerWeights* next) {
    const int64_t n = x.rows, E = hp.n_embd;
    Routing r = dsv4_route(be, hp, L, x, tokens);
    Tensor out = be.alloc(n, E);
    const ExpertMatrices m = experts.resolve(be, L.experts, r);
    // The shared expert between resolve and the routed op: a streamed
    // step's misses are still being read while it computes (a reorder of
    // independent work; the sum below is the same).
    const int64_t n_ff = L.gate_shexp.ne[1];
    Tensor g = be.alloc(n, n_ff), u = be.alloc(n, n_ff), d = be.alloc(n, E);
    be.matmul(L.gate_shexp, x, g);
    be.matmul(L.up_shexp, x, u);
    dsv4_ops(be).swiglu_clamp(g, u, hp.swiglu_clamp_shexp[size_t(layer)], g);
    be.matmul(L.down_shexp, g, d);

    dsv4_ops(be).moe_swiglu_clamp(x, r, m.gate, m.up, m.down, hp.swiglu_clamp_exp[size_t(layer)], out);
    // Router lookahead: the next block's router on this block's FFN input
    // guesses its experts (exactly, on a hash layer), read while its
    // attention runs.
    if (next && experts.wants_lookahead(n)) experts.prefetch(be, next->experts, dsv4_route(be, hp, *next, x, tokens));
    be.add(out, d, out);
    return out;
}

}  // namespace ds4

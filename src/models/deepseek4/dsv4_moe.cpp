#include "models/deepseek4/dsv4_moe.h"

#include <vector>

namespace ds4 {

Tensor dsv4_ffn(Backend& be, const Dsv4Hparams& hp, const Dsv4LayerWeights& L, int layer, const Tensor& x,
                const int32_t* tokens) {
    const int64_t n = x.rows, E = hp.n_embd;
    Tensor logits = be.alloc(n, hp.n_expert);
    be.matmul(L.gate_inp, x, logits);
    std::vector<int32_t> forced;
    if (L.tid2eid) {
        forced.resize(static_cast<size_t>(n * hp.n_expert_used));
        for (int64_t t = 0; t < n; ++t)
            for (int j = 0; j < hp.n_expert_used; ++j)
                forced[t * hp.n_expert_used + j] = L.tid2eid[int64_t(tokens[t]) * hp.n_expert_used + j];
    }
    // Hash layers weight their fixed experts by the unbiased scores.
    const Routing r = be.route_sqrt_softplus(logits, L.tid2eid ? nullptr : &L.exp_probs_b,
                                             L.tid2eid ? forced.data() : nullptr, hp.n_expert_used,
                                             hp.expert_weights_norm, hp.expert_weights_scale);
    Tensor out = be.alloc(n, E);
    be.moe_swiglu_clamp(x, r, L.gate_exps, L.up_exps, L.down_exps, hp.swiglu_clamp_exp[size_t(layer)], out);

    const int64_t n_ff = L.gate_shexp.ne[1];
    Tensor g = be.alloc(n, n_ff), u = be.alloc(n, n_ff), d = be.alloc(n, E);
    be.matmul(L.gate_shexp, x, g);
    be.matmul(L.up_shexp, x, u);
    be.swiglu_clamp(g, u, hp.swiglu_clamp_shexp[size_t(layer)], g);
    be.matmul(L.down_shexp, g, d);
    be.add(out, d, out);
    return out;
}

}  // namespace ds4

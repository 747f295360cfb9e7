#include "models/deepseek4/dsv4_moe.h"
#include "models/deepseek4/dsv4_ops.h"

#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"

namespace ds4 {

Tensor dsv4_ffn(Backend& be, const Dsv4Hparams& hp, const Dsv4LayerWeights& L, int layer, const Tensor& x,
                const int32_t* tokens, ExpertSource& experts) {
    const int64_t n = x.rows, E = hp.n_embd;
    Tensor logits = be.alloc(n, hp.n_expert);
    be.matmul(L.gate_inp, x, logits);
    std::vector<int32_t> forced;
    if (L.tid2eid) {
        // The table is read only here, a row per token, so its ids are
        // checked here too (the load reads none of its bytes).
        const int64_t u = hp.n_expert_used;
        forced.resize(static_cast<size_t>(n * u));
        for (int64_t t = 0; t < n; ++t) {
            if (tokens[t] < 0 || tokens[t] >= hp.n_vocab)
                throw Error(hp.path + ": token " + std::to_string(tokens[t]) + " is outside its vocabulary of " +
                            std::to_string(hp.n_vocab) + " tokens.");
            std::memcpy(&forced[static_cast<size_t>(t * u)], L.tid2eid + (int64_t(tokens[t]) * u) * 4,
                        static_cast<size_t>(u) * 4);
            for (int64_t j = 0; j < u; ++j) {
                const int32_t e = forced[static_cast<size_t>(t * u + j)];
                if (e < 0 || e >= hp.n_expert)
                    throw Error(hp.path + ": hash-routing table 'blk." + std::to_string(layer) +
                                ".ffn_gate_tid2eid.weight' sends token " + std::to_string(tokens[t]) + " to expert " +
                                std::to_string(e) + ", but the model has " + std::to_string(hp.n_expert) +
                                " experts.");
            }
        }
    }
    // Hash layers weight their fixed experts by the unbiased scores.
    Routing r = dsv4_ops(be).route_sqrt_softplus(logits, L.tid2eid ? nullptr : &L.exp_probs_b,
                                             L.tid2eid ? forced.data() : nullptr, hp.n_expert_used,
                                             hp.expert_weights_norm, hp.expert_weights_scale);
    Tensor out = be.alloc(n, E);
    const ExpertMatrices m = experts.resolve(be, L.experts, r);
    dsv4_ops(be).moe_swiglu_clamp(x, r, m.gate, m.up, m.down, hp.swiglu_clamp_exp[size_t(layer)], out);

    const int64_t n_ff = L.gate_shexp.ne[1];
    Tensor g = be.alloc(n, n_ff), u = be.alloc(n, n_ff), d = be.alloc(n, E);
    be.matmul(L.gate_shexp, x, g);
    be.matmul(L.up_shexp, x, u);
    dsv4_ops(be).swiglu_clamp(g, u, hp.swiglu_clamp_shexp[size_t(layer)], g);
    be.matmul(L.down_shexp, g, d);
    be.add(out, d, out);
    return out;
}

}  // namespace ds4

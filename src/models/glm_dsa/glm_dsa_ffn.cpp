#include "models/glm_dsa/glm_dsa_ffn.h"

#include "models/glm_dsa/glm_dsa_ops.h"

namespace ds4 {

namespace {

// down(silu(gate x) * up x), as llama.cpp's build_ffn with LLM_FFN_SILU, LLM_FFN_PAR.
Tensor swiglu_ffn(Backend& be, const GlmScaled& gate, const GlmScaled& up, const GlmScaled& down, const Tensor& x,
                  int64_t n_embd) {
    const int64_t n = x.rows, F = gate.w.ne[1];
    Tensor g = be.alloc(n, F), u = be.alloc(n, F), out = be.alloc(n, n_embd);
    glm_project(be, gate, x, g);
    glm_project(be, up, x, u);
    be.swiglu(g, u, g);
    glm_project(be, down, g, out);
    return out;
}

// Block B's routing of the rows x.
Routing glm_route(Backend& be, const GlmDsaHparams& hp, const GlmDsaLayerWeights& B, const Tensor& x) {
    Tensor logits = be.alloc(x.rows, hp.n_expert);
    be.matmul(B.gate_inp, x, logits);
    return glm_dsa_ops(be).route_sigmoid(logits, B.exp_probs_b ? &B.exp_probs_b : nullptr, hp.n_expert_used,
                                         hp.n_expert_groups, hp.n_group_used, hp.expert_weights_norm,
                                         hp.expert_weights_scale);
}

}  // namespace

Tensor glm_ffn(Backend& be, const GlmDsaHparams& hp, const GlmDsaLayerWeights& L, int layer, const Tensor& x,
               ExpertSource& experts, const GlmDsaLayerWeights* next) {
    if (layer < hp.n_dense_lead) return swiglu_ffn(be, L.gate, L.up, L.down, x, hp.n_embd);

    const int64_t n = x.rows;
    Routing r = glm_route(be, hp, L, x);
    Tensor out = be.alloc(n, hp.n_embd);
    const ExpertMatrices m = experts.resolve(be, L.experts, r);
    // The shared expert between resolve and the routed op: a streamed
    // step's misses are still being read while it computes.
    const Tensor shared = swiglu_ffn(be, L.gate_shexp, L.up_shexp, L.down_shexp, x, hp.n_embd);
    be.moe_swiglu(x, r, m.gate, m.up, m.down, m.scale_of(m.gate_scale), m.scale_of(m.up_scale),
                  m.scale_of(m.down_scale), out);
    // Router lookahead: the next block's router on this block's FFN input
    // guesses its experts, read while its attention runs.
    if (next && experts.wants_lookahead(n)) experts.prefetch(be, next->experts, glm_route(be, hp, *next, x));
    be.add(out, shared, out);
    return out;
}

}  // namespace ds4

#include "models/deepseek4/dsv4_attention.h"

#include <cmath>

#include "models/deepseek4/dsv4_compressor.h"
#include "models/deepseek4/dsv4_indexer.h"

namespace ds4 {

Dsv4StepPlan plan_dsv4_step(Backend& be, const Dsv4Hparams& hp, const Dsv4State& state, const Batch& batch) {
    Dsv4Ops& ops = dsv4_ops(be);
    Dsv4StepPlan plan;
    plan.rows = ops.plan_rows(batch.cache, batch.n);
    plan.window_dst = ops.plan_ring(plan.rows, hp.n_swa);
    for (const Dsv4LayerState& l : state.layers) {
        const Dsv4CompressorState& c = l.attn;
        if (!c.active()) continue;
        Dsv4CompressorPlan& p = c.ratio == kDsv4CsaRatio ? plan.csa : plan.hca;
        if (p.ratio == 0) p = ops.plan_compressor(plan.rows, c.ratio, c.overlap, c.cache_rows);
    }
    return plan;
}

Tensor dsv4_attention(Backend& be, const Dsv4Hparams& hp, const Dsv4LayerWeights& L, const Dsv4StepPlan& plan,
                      Dsv4LayerState& st, int layer, const Tensor& cur) {
    const int64_t n = cur.rows, D = hp.head_dim, H = hp.n_head;
    const int ratio = hp.compress_ratios[static_cast<size_t>(layer)];
    const RopeParams& rope = ratio != 0 ? hp.rope_compress : hp.rope_window;
    const int nope = static_cast<int>(D) - hp.n_rot;
    const IntArray& positions = plan.rows.positions;
    Dsv4Ops& ops = dsv4_ops(be);

    Tensor qr = be.alloc(n, hp.q_lora_rank);
    be.matmul(L.wq_a, cur, qr);
    be.rms_norm(qr, &L.q_a_norm, hp.rms_eps, hp.q_lora_rank, qr);
    Tensor q = be.alloc(n, H * D);
    be.matmul(L.wq_b, qr, q);
    be.rms_norm(q, nullptr, hp.rms_eps, D, q);
    ops.rope_partial(q, static_cast<int>(D), nope, positions, rope, false);

    Tensor kv = be.alloc(n, D);
    be.matmul(L.wkv, cur, kv);
    be.rms_norm(kv, &L.kv_norm, hp.rms_eps, D, kv);
    ops.rope_partial(kv, static_cast<int>(D), nope, positions, rope, false);

    // Blocks completed by a row are visible to it and to the later rows of its run.
    RowSets selected;
    if (ratio != 0) {
        const Dsv4CompressorPlan& cp = plan.for_ratio(ratio);
        compressor_update(be, L.compressor, st.attn, cp, cur, D, hp.rope_compress, hp.rms_eps);
        selected = ratio == kDsv4CsaRatio ? indexer_select(be, hp, L, st.indexer, cp, qr, cur, positions)
                                          : cp.visible;
    }
    AttentionParams ap;
    ap.n_head = static_cast<int>(H);
    ap.n_head_kv = 1;
    ap.head_dim_k = ap.head_dim_v = static_cast<int>(D);
    ap.scale = 1.0f / std::sqrt(static_cast<float>(D));
    Tensor out = be.alloc(n, H * D);
    ops.attention_window_sink(q, kv, st.window, plan.rows, hp.n_swa, ratio != 0 ? &st.attn.cache : nullptr,
                              ratio != 0 ? &selected : nullptr, L.attn_sinks, ap, out);
    // The window ring keeps the newest n_swa raw keys of each sequence.
    ops.scatter_rows(kv, plan.window_dst, st.window);

    // Values carry the keys' rotation: rotate the output back to the query position.
    ops.rope_partial(out, static_cast<int>(D), nope, positions, rope, true);
    Tensor oa = be.alloc(n, int64_t(hp.o_groups) * hp.o_lora_rank);
    ops.matmul_grouped(L.wo_a, out, oa);
    Tensor res = be.alloc(n, hp.n_embd);
    be.matmul(L.wo_b, oa, res);
    return res;
}

}  // namespace ds4

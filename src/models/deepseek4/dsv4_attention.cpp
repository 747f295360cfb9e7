#include "models/deepseek4/dsv4_attention.h"
#include "models/deepseek4/dsv4_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "models/deepseek4/dsv4_compressor.h"
#include "models/deepseek4/dsv4_indexer.h"

namespace ds4 {

namespace {

// Rows [r0, r0 + n) of an id array, sharing its memory.
IntArray int_rows(const IntArray& a, int64_t r0, int64_t n) {
    IntArray v = a;
    v.data = a.data + r0;
    v.n = n;
    return v;
}

}  // namespace

Tensor dsv4_attention(Backend& be, const Dsv4Hparams& hp, const Dsv4LayerWeights& L, const std::vector<Dsv4Segment>& segs,
                      int layer, const Tensor& cur, const IntArray& positions) {
    const int64_t n = cur.rows, D = hp.head_dim, H = hp.n_head;
    const int ratio = hp.compress_ratios[static_cast<size_t>(layer)];
    const RopeParams& rope = ratio != 0 ? hp.rope_compress : hp.rope_window;
    const int nope = static_cast<int>(D) - hp.n_rot;

    Tensor qr = be.alloc(n, hp.q_lora_rank);
    be.matmul(L.wq_a, cur, qr);
    be.rms_norm(qr, &L.q_a_norm, hp.rms_eps, hp.q_lora_rank, qr);
    Tensor q = be.alloc(n, H * D);
    be.matmul(L.wq_b, qr, q);
    be.rms_norm(q, nullptr, hp.rms_eps, D, q);
    dsv4_ops(be).rope_partial(q, static_cast<int>(D), nope, positions, rope, false);

    Tensor kv = be.alloc(n, D);
    be.matmul(L.wkv, cur, kv);
    be.rms_norm(kv, &L.kv_norm, hp.rms_eps, D, kv);
    dsv4_ops(be).rope_partial(kv, static_cast<int>(D), nope, positions, rope, false);

    AttentionParams ap;
    ap.n_head = static_cast<int>(H);
    ap.n_head_kv = 1;
    ap.head_dim_k = ap.head_dim_v = static_cast<int>(D);
    ap.scale = 1.0f / std::sqrt(static_cast<float>(D));
    Tensor out = be.alloc(n, H * D);

    for (const Dsv4Segment& sg : segs) {
        Dsv4LayerState& st = *sg.state;
        const int64_t pos0 = sg.pos0, m = sg.n;
        const Tensor cur_s = cur.row_view(sg.row0, m), kv_s = kv.row_view(sg.row0, m);
        RowLists selected;
        if (ratio != 0) {
            // Blocks completed inside this chunk are visible to its later rows.
            compressor_update(be, L.compressor, st.attn, cur_s, pos0, D, hp.rope_compress, hp.rms_eps);
            if (ratio == kDsv4CsaRatio) {
                selected = indexer_select(be, hp, L, st.indexer, qr.row_view(sg.row0, m), cur_s, pos0,
                                          int_rows(positions, sg.row0, m));
            } else {
                selected.offsets.push_back(0);
                for (int64_t t = 0; t < m; ++t) {
                    const int64_t visible = (pos0 + t + 1) / ratio;
                    for (int64_t b = 0; b < visible; ++b) selected.rows.push_back(static_cast<int32_t>(b));
                    selected.offsets.push_back(static_cast<int32_t>(selected.rows.size()));
                }
            }
        }
        Tensor out_s = out.row_view(sg.row0, m);
        dsv4_ops(be).attention_window_sink(q.row_view(sg.row0, m), kv_s, st.window, pos0, hp.n_swa,
                                 ratio != 0 ? &st.attn.cache : nullptr, ratio != 0 ? &selected : nullptr, L.attn_sinks,
                                 ap, out_s);

        // The window ring keeps the newest n_swa raw keys.
        const int64_t keep = std::min(m, hp.n_swa);
        std::vector<int32_t> src(static_cast<size_t>(keep)), dst(static_cast<size_t>(keep));
        for (int64_t i = 0; i < keep; ++i) {
            src[i] = static_cast<int32_t>(m - keep + i);
            dst[i] = static_cast<int32_t>((pos0 + m - keep + i) % hp.n_swa);
        }
        dsv4_ops(be).copy_rows(kv_s, src.data(), st.window, dst.data(), keep);
    }

    // Values carry the keys' rotation: rotate the output back to the query position.
    dsv4_ops(be).rope_partial(out, static_cast<int>(D), nope, positions, rope, true);
    Tensor oa = be.alloc(n, int64_t(hp.o_groups) * hp.o_lora_rank);
    dsv4_ops(be).matmul_grouped(L.wo_a, out, oa);
    Tensor res = be.alloc(n, hp.n_embd);
    be.matmul(L.wo_b, oa, res);
    return res;
}

}  // namespace ds4

#include "models/deepseek4/dsv4_indexer.h"

#include <cmath>

#include "models/deepseek4/dsv4_compressor.h"

namespace ds4 {

RowSets indexer_select(Backend& be, const Dsv4Hparams& hp, const Dsv4LayerWeights& L, Dsv4CompressorState& st,
                       const Dsv4CompressorPlan& plan, const Tensor& qr, const Tensor& cur,
                       const IntArray& positions) {
    const int64_t n = cur.rows, Di = hp.indexer_head_dim, H = hp.indexer_n_head;
    compressor_update(be, L.indexer_compressor, st, plan, cur, Di, hp.rope_compress, hp.rms_eps);

    Tensor q = be.alloc(n, H * Di);
    be.matmul(L.indexer_q_b, qr, q);
    dsv4_ops(be).rope_partial(q, static_cast<int>(Di), static_cast<int>(Di) - hp.n_rot, positions, hp.rope_compress,
                              false);
    // llama.cpp also applies a Hadamard rotation to both indexer queries and
    // keys; it is orthogonal, so the q.k scores (and the selection) are the
    // same without it.
    Tensor w = be.alloc(n, H);
    be.matmul(L.indexer_proj, cur, w);
    be.scale(w, 1.0f / std::sqrt(static_cast<float>(Di * H)));
    return dsv4_ops(be).indexer_topk(q, w, st.cache, plan.visible, hp.indexer_top_k);
}

}  // namespace ds4

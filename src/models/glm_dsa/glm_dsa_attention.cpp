#include "models/glm_dsa/glm_dsa_attention.h"

#include <cmath>

#include "models/glm_dsa/glm_dsa_ops.h"

namespace ds4 {

RowSets glm_indexer_select(Backend& be, const GlmDsaHparams& hp, const GlmDsaLayerWeights& L, GlmDsaLayerState& st,
                           const CacheRows& where, const RowSets& visible, const Tensor& qr, const Tensor& x) {
    const int64_t n = x.rows, H = hp.indexer_n_head, Di = hp.indexer_head_dim;
    // A head is [rope | nope]: RoPE turns its first n_rot dimensions.
    Tensor q = be.alloc(n, H * Di);
    be.matmul(L.indexer_q_b, qr, q);
    be.rope(q, static_cast<int>(Di), where.positions, hp.rope);
    Tensor k = be.alloc(n, Di);
    be.matmul(L.indexer_k, x, k);
    glm_dsa_ops(be).layer_norm(k, &L.indexer_k_norm, &L.indexer_k_norm_b, hp.indexer_norm_eps, k);
    be.rope(k, static_cast<int>(Di), where.positions, hp.rope);
    glm_dsa_ops(be).cache_store(st.indexer_keys, k, where);
    // llama.cpp also applies a Hadamard rotation to both indexer queries and
    // keys; it is orthogonal, so the q.k scores (and the selection) are the
    // same without it.
    Tensor w = be.alloc(n, H);
    be.matmul(L.indexer_proj, x, w);
    be.scale(w, 1.0f / std::sqrt(static_cast<float>(Di * H)));
    return dsv4_ops(be).indexer_topk(q, w, st.indexer_keys, visible, hp.indexer_top_k);
}

Tensor glm_attention(Backend& be, const GlmDsaHparams& hp, const GlmDsaLayerWeights& L, GlmDsaLayerState& st,
                     const CacheRows& where, const RowSets& selected, const Tensor& qr, const Tensor& x) {
    GlmDsaOps& ops = glm_dsa_ops(be);
    const int64_t n = x.rows, H = hp.n_head, R = hp.n_rot, KV = hp.kv_lora_rank;
    // Queries: per head [nope | rope]; the nope part is absorbed into the
    // latent space by wk_b, so scores are taken against the latent cache.
    Tensor q = be.alloc(n, H * hp.head_dim_k);
    be.matmul(L.wq_b, qr, q);
    Tensor q_nope = be.alloc(n, H * hp.n_nope()), q_pe = be.alloc(n, H * R);
    ops.head_columns(q, static_cast<int>(H), hp.head_dim_k, 0, hp.n_nope(), q_nope);
    ops.head_columns(q, static_cast<int>(H), hp.head_dim_k, hp.n_nope(), static_cast<int>(R), q_pe);
    be.rope(q_pe, static_cast<int>(R), where.positions, hp.rope);
    Tensor q_lat = be.alloc(n, H * KV);
    dsv4_ops(be).matmul_grouped(L.wk_b, q_nope, q_lat);

    // This step's cache rows: the normed latent and the roped shared key.
    Tensor kv = be.alloc(n, KV + R);
    be.matmul(L.wkv_a, x, kv);
    Tensor latent = be.alloc(n, KV), pe = be.alloc(n, R);
    ops.head_columns(kv, 1, static_cast<int>(KV + R), 0, static_cast<int>(KV), latent);
    ops.head_columns(kv, 1, static_cast<int>(KV + R), static_cast<int>(KV), static_cast<int>(R), pe);
    be.rms_norm(latent, &L.kv_a_norm, hp.rms_eps, KV, latent);
    be.rope(pe, static_cast<int>(R), where.positions, hp.rope);
    ops.cache_store(st.latent, latent, where);
    ops.cache_store(st.pe, pe, where);

    Tensor att = be.alloc(n, H * KV);
    ops.attention_latent(q_lat, q_pe, st.latent, st.pe, selected, static_cast<int>(H), hp.kq_scale, att);
    // Each head's latent output becomes its value through wv_b.
    Tensor v = be.alloc(n, H * hp.head_dim_v);
    dsv4_ops(be).matmul_grouped(L.wv_b, att, v);
    Tensor out = be.alloc(n, hp.n_embd);
    glm_project(be, L.wo, v, out);
    return out;
}

}  // namespace ds4

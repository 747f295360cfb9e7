#include "models/deepseek4/dsv4_compressor.h"

#include <algorithm>

namespace ds4 {

Dsv4CompressorState make_compressor_state(Backend& be, int ratio, int64_t dim, int64_t n_ctx, int n_slots,
                                          uint64_t& bytes) {
    Dsv4CompressorState st;
    st.ratio = ratio;
    st.overlap = ratio == kDsv4CsaRatio;
    const int64_t coff = st.overlap ? 2 : 1;
    st.ring = coff * ratio;  // the current block, and the previous one when overlapping
    st.cache_rows = std::max<int64_t>(1, n_ctx / ratio);
    st.ring_kv = be.alloc(n_slots * st.ring, coff * dim);
    st.ring_score = be.alloc(n_slots * st.ring, coff * dim);
    st.cache = be.alloc(n_slots * st.cache_rows, dim);
    bytes += sizeof(float) * static_cast<uint64_t>(st.ring_kv.size() + st.ring_score.size() + st.cache.size());
    return st;
}

void compressor_update(Backend& be, const Dsv4CompressorWeights& w, Dsv4CompressorState& st,
                       const Dsv4CompressorPlan& plan, const Tensor& cur, int64_t dim, const RopeParams& rope,
                       float rms_eps) {
    const int64_t n = cur.rows;
    const int64_t coff = st.overlap ? 2 : 1;
    Dsv4Ops& ops = dsv4_ops(be);

    Tensor kv = be.alloc(n, coff * dim), score = be.alloc(n, coff * dim), ape = be.alloc(n, coff * dim);
    be.matmul(w.wkv, cur, kv);
    be.matmul(w.wgate, cur, score);
    be.get_rows(w.ape, plan.in_block, ape);
    be.add(score, ape, score);

    // Every row gets a pooled row (zeros where no block ends); only the
    // rows that end a block reach the cache. Pooling reads the ring before
    // this batch's rows overwrite it.
    Tensor pooled = be.alloc(n, dim);
    ops.compress_pool(st.ring_kv, st.ring_score, kv, score, plan.sources, plan.per_block(), st.overlap, pooled);
    be.rms_norm(pooled, &w.norm, rms_eps, dim, pooled);
    ops.rope_partial(pooled, static_cast<int>(dim), static_cast<int>(dim) - rope.n_rot, plan.block_pos, rope, false);
    ops.scatter_rows(pooled, plan.cache_dst, st.cache);

    // Keep the newest `ring` positions of each sequence for blocks completing later.
    ops.scatter_rows(kv, plan.ring_dst, st.ring_kv);
    ops.scatter_rows(score, plan.ring_dst, st.ring_score);
}

}  // namespace ds4

#include "models/deepseek4/dsv4_compressor.h"
#include "models/deepseek4/dsv4_ops.h"

#include <algorithm>
#include <vector>

namespace ds4 {

Dsv4CompressorState make_compressor_state(Backend& be, int ratio, int64_t dim, int64_t n_ctx, uint64_t& bytes) {
    Dsv4CompressorState st;
    st.ratio = ratio;
    st.overlap = ratio == kDsv4CsaRatio;
    const int64_t coff = st.overlap ? 2 : 1;
    const int64_t ring = coff * ratio;  // the current block, and the previous one when overlapping
    st.ring_kv = be.alloc(ring, coff * dim);
    st.ring_score = be.alloc(ring, coff * dim);
    st.cache = be.alloc(std::max<int64_t>(1, n_ctx / ratio), dim);
    bytes += sizeof(float) * static_cast<uint64_t>(st.ring_kv.size() + st.ring_score.size() + st.cache.size());
    return st;
}

void compressor_update(Backend& be, const Dsv4CompressorWeights& w, Dsv4CompressorState& st, const Tensor& cur,
                       int64_t pos0, int64_t dim, const RopeParams& rope, float rms_eps) {
    const int64_t n = cur.rows;
    const int r = st.ratio;
    const int64_t coff = st.overlap ? 2 : 1;
    const int64_t ring = st.ring_kv.rows;

    Tensor kv = be.alloc(n, coff * dim), score = be.alloc(n, coff * dim), ape = be.alloc(n, coff * dim);
    be.matmul(w.wkv, cur, kv);
    be.matmul(w.wgate, cur, score);
    std::vector<int32_t> in_block(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) in_block[i] = static_cast<int32_t>((pos0 + i) % r);
    be.get_rows(w.ape, be.ints(in_block.data(), n), ape);
    be.add(score, ape, score);

    // Source ids index [ring rows | chunk rows]; -1 before position 0.
    auto source = [&](int64_t q) -> int32_t {
        if (q < 0) return -1;
        if (q >= pos0) return static_cast<int32_t>(ring + (q - pos0));
        return static_cast<int32_t>(q % ring);
    };
    std::vector<int32_t> sources, block_rows, block_pos;
    for (int64_t p = pos0; p < pos0 + n; ++p) {
        if ((p + 1) % r != 0) continue;
        const int64_t start = p + 1 - r;
        if (st.overlap)
            for (int j = 0; j < r; ++j) sources.push_back(source(start - r + j));
        for (int j = 0; j < r; ++j) sources.push_back(source(start + j));
        block_rows.push_back(static_cast<int32_t>(p / r));
        block_pos.push_back(static_cast<int32_t>(start));
    }
    const int64_t nb = static_cast<int64_t>(block_rows.size());
    if (nb > 0) {
        Tensor pooled = be.alloc(nb, dim);
        dsv4_ops(be).compress_pool(st.ring_kv, st.ring_score, kv, score, sources.data(), static_cast<int>(coff * r), st.overlap,
                         pooled);
        be.rms_norm(pooled, &w.norm, rms_eps, dim, pooled);
        dsv4_ops(be).rope_partial(pooled, static_cast<int>(dim), static_cast<int>(dim) - rope.n_rot, be.ints(block_pos.data(), nb), rope,
                        false);
        std::vector<int32_t> src(static_cast<size_t>(nb));
        for (int64_t i = 0; i < nb; ++i) src[i] = static_cast<int32_t>(i);
        dsv4_ops(be).copy_rows(pooled, src.data(), st.cache, block_rows.data(), nb);
    }

    // Keep the newest `ring` positions for blocks completing later.
    const int64_t keep = std::min(n, ring);
    std::vector<int32_t> src(static_cast<size_t>(keep)), dst(static_cast<size_t>(keep));
    for (int64_t i = 0; i < keep; ++i) {
        const int64_t row = n - keep + i;
        src[i] = static_cast<int32_t>(row);
        dst[i] = static_cast<int32_t>((pos0 + row) % ring);
    }
    dsv4_ops(be).copy_rows(kv, src.data(), st.ring_kv, dst.data(), keep);
    dsv4_ops(be).copy_rows(score, src.data(), st.ring_score, dst.data(), keep);
}

}  // namespace ds4

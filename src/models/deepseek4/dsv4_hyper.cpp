#include "models/deepseek4/dsv4_hyper.h"
#include "models/deepseek4/dsv4_ops.h"

namespace ds4 {

namespace {
Tensor mixes_of(Backend& be, const Dsv4Hparams& hp, const WeightRef& fn, const Tensor& streams) {
    Tensor normed = be.alloc(streams.rows, streams.cols);
    be.rms_norm(streams, nullptr, hp.rms_eps, streams.cols, normed);
    Tensor mixes = be.alloc(streams.rows, fn.ne[1]);
    be.matmul(fn, normed, mixes);
    return mixes;
}
HcParams hc_params(const Dsv4Hparams& hp) { return HcParams{hp.n_hc, hp.hc_eps, hp.sinkhorn_iters}; }
}  // namespace

Tensor hc_pre(Backend& be, const Dsv4Hparams& hp, const Dsv4HcWeights& w, const Tensor& streams, HcSite& site) {
    const int64_t n = streams.rows, hc = hp.n_hc;
    const Tensor mixes = mixes_of(be, hp, w.fn, streams);
    Tensor pre = be.alloc(n, hc);
    site.post = be.alloc(n, hc);
    site.comb = be.alloc(n, hc * hc);
    dsv4_ops(be).hc_mixes(mixes, w.scale, w.base, hc_params(hp), pre, &site.post, &site.comb);
    Tensor out = be.alloc(n, hp.n_embd);
    dsv4_ops(be).hc_collapse(streams, pre, out);
    return out;
}

void hc_post(Backend& be, const Tensor& y, const Tensor& streams_in, const HcSite& site, Tensor& streams_out) {
    dsv4_ops(be).hc_expand(y, streams_in, site.post, site.comb, streams_out);
}

Tensor hc_head(Backend& be, const Dsv4Hparams& hp, const Dsv4HcWeights& w, const Tensor& streams) {
    const Tensor mixes = mixes_of(be, hp, w.fn, streams);
    Tensor pre = be.alloc(streams.rows, hp.n_hc);
    dsv4_ops(be).hc_mixes(mixes, w.scale, w.base, hc_params(hp), pre, nullptr, nullptr);
    Tensor out = be.alloc(streams.rows, hp.n_embd);
    dsv4_ops(be).hc_collapse(streams, pre, out);
    return out;
}

}  // namespace ds4

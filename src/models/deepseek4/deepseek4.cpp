// The DeepSeek V4 forward pass: token embedding copied into n_hc residual
// streams; per layer hyper-connection -> attention -> hyper-connection ->
// MoE + shared expert; the head collapses the streams, norms and projects.
// MTP layers are not run.
#include "models/deepseek4/deepseek4.h"

#include <utility>
#include <vector>

#include "common/error.h"
#include "models/deepseek4/dsv4_attention.h"
#include "models/deepseek4/dsv4_compressor.h"
#include "models/deepseek4/dsv4_hyper.h"
#include "models/deepseek4/dsv4_moe.h"
#include "models/deepseek4/dsv4_state.h"

namespace ds4 {
namespace {

class DeepSeek4 final : public Model {
public:
    DeepSeek4(const GgufFile& file, ModelMap& map) {
        hp_ = read_dsv4_hparams(file);
        w_ = bind_dsv4_weights(file, map, hp_);
        info_.arch = "deepseek4";
        info_.name = file.get_string("general.name").value_or("");
        info_.n_vocab = hp_.n_vocab;
        info_.n_embd = hp_.n_embd;
        info_.n_layer = hp_.n_layer;
        info_.n_ctx_train = hp_.n_ctx_train;
    }

    const ModelInfo& info() const override { return info_; }

    std::unique_ptr<ModelState> new_state(Backend& be, int64_t n_ctx) const override {
        auto st = std::make_unique<Dsv4State>();
        st->ctx = n_ctx;
        for (int l = 0; l < hp_.n_layer; ++l) {
            Dsv4LayerState ls;
            ls.window = be.alloc(hp_.n_swa, hp_.head_dim);
            st->size += sizeof(float) * static_cast<uint64_t>(ls.window.size());
            const int ratio = hp_.compress_ratios[static_cast<size_t>(l)];
            if (ratio != 0) ls.attn = make_compressor_state(be, ratio, hp_.head_dim, n_ctx, st->size);
            if (ratio == kDsv4CsaRatio)
                ls.indexer = make_compressor_state(be, ratio, hp_.indexer_head_dim, n_ctx, st->size);
            st->layers.push_back(std::move(ls));
        }
        return st;
    }

    Tensor forward(Backend& be, ModelState& state_base, const int32_t* tokens, int64_t n, int64_t pos0,
                   bool all_logits) const override {
        auto& state = static_cast<Dsv4State&>(state_base);
        if (pos0 + n > state.ctx)
            throw Error("the context of " + std::to_string(state.ctx) + " tokens is full (position " +
                        std::to_string(pos0 + n) + " requested); raise --ctx.");
        const int64_t E = hp_.n_embd, hc = hp_.n_hc;
        std::vector<int32_t> pos(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(pos0 + i);

        Tensor emb = be.alloc(n, E);
        be.get_rows(w_.tok_embd, tokens, n, emb);
        std::vector<float> host(static_cast<size_t>(n * E)), streams_host(static_cast<size_t>(n * hc * E));
        be.download(emb, host.data());
        for (int64_t t = 0; t < n; ++t)
            for (int64_t h = 0; h < hc; ++h)
                std::copy(host.begin() + t * E, host.begin() + (t + 1) * E, streams_host.begin() + (t * hc + h) * E);
        Tensor x = be.alloc(n, hc * E), y = be.alloc(n, hc * E);
        be.upload(x, streams_host.data());

        for (int l = 0; l < hp_.n_layer; ++l) {
            const Dsv4LayerWeights& L = w_.layers[static_cast<size_t>(l)];
            HcSite site;
            Tensor cur = hc_pre(be, hp_, L.hc_attn, x, site);
            be.rms_norm(cur, &L.attn_norm, hp_.rms_eps, E, cur);
            const Tensor attn =
                dsv4_attention(be, hp_, L, state.layers[static_cast<size_t>(l)], l, cur, pos0, pos.data());
            hc_post(be, attn, x, site, y);
            std::swap(x, y);

            cur = hc_pre(be, hp_, L.hc_ffn, x, site);
            be.rms_norm(cur, &L.ffn_norm, hp_.rms_eps, E, cur);
            const Tensor ffn = dsv4_ffn(be, hp_, L, l, cur, tokens);
            hc_post(be, ffn, x, site, y);
            std::swap(x, y);
        }

        Tensor last = x;
        if (!all_logits && n > 1) {
            last = be.alloc(1, hc * E);
            be.download(x, streams_host.data());
            be.upload(last, streams_host.data() + (n - 1) * hc * E);
        }
        Tensor h = hc_head(be, hp_, w_.hc_head, last);
        be.rms_norm(h, &w_.output_norm, hp_.rms_eps, E, h);
        Tensor logits = be.alloc(last.rows, hp_.n_vocab);
        be.matmul(w_.output, h, logits);
        return logits;
    }

private:
    Dsv4Hparams hp_;
    Dsv4Weights w_;
    ModelInfo info_;
};

}  // namespace

std::unique_ptr<Model> load_deepseek4(const GgufFile& file, ModelMap& map) {
    return std::make_unique<DeepSeek4>(file, map);
}

}  // namespace ds4

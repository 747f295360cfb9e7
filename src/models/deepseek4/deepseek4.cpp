// The DeepSeek V4 forward pass: token embedding copied into n_hc residual
// streams; per layer hyper-connection -> attention -> hyper-connection ->
// MoE + shared expert; the head collapses the streams, norms and projects.
// MTP layers are not run.
#include "models/deepseek4/deepseek4.h"
#include "models/deepseek4/dsv4_ops.h"

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

// Sequences one state holds: any number the memory allows; this bounds a
// typo's allocation.
constexpr int kMaxDsv4Slots = 4096;

class DeepSeek4 final : public Model {
public:
    DeepSeek4(const GgufFile& file, ModelMap& map, const LoadOptions& opts) {
        hp_ = read_dsv4_hparams(file);
        const LayerRange range = layer_range(opts, hp_.n_layer, file.path());
        first_ = range.begin;
        last_ = range.end;
        w_ = bind_dsv4_weights(file, map, hp_, first_, last_, range.has_output(hp_.n_layer), opts.resident_experts);
        info_.arch = "deepseek4";
        info_.name = file.get_string("general.name").value_or("");
        info_.n_vocab = hp_.n_vocab;
        info_.n_embd = hp_.n_embd;
        info_.n_layer = hp_.n_layer;
        info_.layers = range;
        info_.n_ctx_train = hp_.n_ctx_train;
    }

    const ModelInfo& info() const override { return info_; }

    int max_slots() const override { return kMaxDsv4Slots; }

    std::unique_ptr<ModelState> new_state(Backend& be, int64_t n_ctx, int n_slots) const override {
        if (n_slots < 1 || n_slots > kMaxDsv4Slots)
            throw Error("a DeepSeek V4 state holds 1 to " + std::to_string(kMaxDsv4Slots) + " sequences, not " +
                        std::to_string(n_slots) + ".");
        auto st = std::make_unique<Dsv4State>();
        st->ctx = n_ctx;
        st->n_swa = hp_.n_swa;
        st->slot_count = n_slots;
        for (int l = first_; l < last_; ++l) {
            Dsv4LayerState ls;
            ls.window = be.alloc(n_slots * hp_.n_swa, hp_.head_dim);
            st->size += sizeof(float) * static_cast<uint64_t>(ls.window.size());
            const int ratio = hp_.compress_ratios[static_cast<size_t>(l)];
            if (ratio != 0) ls.attn = make_compressor_state(be, ratio, hp_.head_dim, n_ctx, n_slots, st->size);
            if (ratio == kDsv4CsaRatio)
                ls.indexer = make_compressor_state(be, ratio, hp_.indexer_head_dim, n_ctx, n_slots, st->size);
            st->layers.push_back(std::move(ls));
        }
        return st;
    }

    // Every index list of a step (which rows the compressors pool and keep,
    // what the indexer and the attention see, the hash-routing table rows)
    // is made on the device from the batch's positions, slots and tokens,
    // so a decode step issues the same ops whatever their values. A batch
    // holds rows of many sequences, each a run of consecutive positions;
    // every op runs once over all rows. The hyper-connection streams travel
    // between stages.
    bool replayable_decode() const override { return true; }

    int64_t hidden_cols() const override { return int64_t(hp_.n_hc) * hp_.n_embd; }

    std::vector<RoutedExperts> routed_experts() const override {
        std::vector<RoutedExperts> all;
        for (const Dsv4LayerWeights& L : w_.layers) all.push_back(L.experts);
        return all;
    }

    Tensor forward(Backend& be, ModelState& state_base, const Batch& in, const Tensor* hidden_in) const override {
        const int64_t n = in.n;
        check_stage_input(info_, hidden_in, n, hidden_cols());
        if (n <= 0) throw Error("DeepSeek V4: an empty batch.");
        auto& state = static_cast<Dsv4State&>(state_base);
        // Host copies are there except while a step is recorded, whose rows
        // the slot pool has checked.
        if (in.host_positions && in.host_slots) check_runs(in, state);
        const int64_t E = hp_.n_embd;

        Tensor x = be.alloc(n, hidden_cols()), y = be.alloc(n, hidden_cols());
        if (hidden_in) {
            be.copy(*hidden_in, x);
        } else {
            // Every residual stream starts as the token's embedding.
            Tensor emb = be.alloc(n, E);
            be.get_rows(w_.tok_embd, in.token_ids, emb);
            dsv4_ops(be).broadcast_streams(emb, x);
        }

        const Dsv4StepPlan plan = plan_dsv4_step(be, hp_, state, in);
        for (int l = first_; l < last_; ++l) {
            const Dsv4LayerWeights& L = w_.layers[static_cast<size_t>(l - first_)];
            HcSite site;
            Tensor cur = hc_pre(be, hp_, L.hc_attn, x, site);
            be.rms_norm(cur, &L.attn_norm, hp_.rms_eps, E, cur);
            const Tensor attn =
                dsv4_attention(be, hp_, L, plan, state.layers[static_cast<size_t>(l - first_)], l, cur);
            hc_post(be, attn, x, site, y);
            std::swap(x, y);

            cur = hc_pre(be, hp_, L.hc_ffn, x, site);
            be.rms_norm(cur, &L.ffn_norm, hp_.rms_eps, E, cur);
            const Dsv4LayerWeights* next = l + 1 < last_ ? &w_.layers[static_cast<size_t>(l + 1 - first_)] : nullptr;
            const Tensor ffn = dsv4_ffn(be, hp_, L, l, cur, in.token_ids, expert_source(), next);
            hc_post(be, ffn, x, site, y);
            std::swap(x, y);
        }
        // Without the head here, the next stage (or the coordinator that
        // owns the head) continues from the streams.
        if (!info_.layers.head_follows_blocks(hp_.n_layer)) return x;
        return head(be, x, in.logit_rows, in.n_logits);
    }

    // The head collapses the hyper-connection streams, norms and projects.
    Tensor head(Backend& be, const Tensor& x, const IntArray& logit_rows, int64_t n_logits) const override {
        check_owns_head(info_);
        Tensor last = be.alloc(n_logits, x.cols);
        be.gather_rows(x, logit_rows, last);
        Tensor h = hc_head(be, hp_, w_.hc_head, last);
        be.rms_norm(h, &w_.output_norm, hp_.rms_eps, hp_.n_embd, h);
        Tensor logits = be.alloc(last.rows, hp_.n_vocab);
        be.matmul(w_.output, h, logits);
        return logits;
    }

private:
    // The batch's rows must be runs of one sequence's consecutive
    // positions: each slot in range and in one run, each run inside the context.
    static void check_runs(const Batch& in, const Dsv4State& state) {
        std::vector<bool> seen(static_cast<size_t>(state.slot_count), false);
        for (int64_t t = 0; t < in.n; ++t) {
            const int32_t slot = in.host_slots[t], pos = in.host_positions[t];
            if (t > 0 && in.host_slots[t - 1] == slot && in.host_positions[t - 1] + 1 == pos) continue;
            if (slot < 0 || slot >= state.slot_count)
                throw Error("DeepSeek V4: batch row " + std::to_string(t) + " names sequence slot " +
                            std::to_string(slot) + " of " + std::to_string(state.slot_count) + ".");
            if (seen[size_t(slot)])
                throw Error("DeepSeek V4: the rows of sequence slot " + std::to_string(slot) +
                            " must be consecutive positions, together in the batch.");
            if (pos < 0) throw Error("DeepSeek V4: batch row " + std::to_string(t) + " has a negative position.");
            seen[size_t(slot)] = true;
        }
        for (int64_t t = 0; t < in.n; ++t)
            if (in.host_positions[t] >= state.ctx)
                throw Error("the context of " + std::to_string(state.ctx) + " tokens is full (position " +
                            std::to_string(int64_t(in.host_positions[t]) + 1) + " requested); raise --ctx.");
    }

    Dsv4Hparams hp_;
    int first_ = 0, last_ = 0;
    Dsv4Weights w_;
    ModelInfo info_;
};

}  // namespace

std::unique_ptr<Model> load_deepseek4(const GgufFile& file, ModelMap& map, const LoadOptions& opts) {
    return std::make_unique<DeepSeek4>(file, map, opts);
}

}  // namespace ds4

// The GLM-5 forward pass, following llama.cpp's glm-dsa graph: per block
// RMS norm -> low-rank query -> (full blocks) lightning indexer top-k ->
// latent attention over the chosen positions -> residual; RMS norm -> dense
// FFN or experts + shared expert -> residual; then the output norm and head.
#include "models/glm_dsa/glm_dsa.h"

#include <optional>
#include <utility>
#include <vector>

#include "common/error.h"
#include "models/glm_dsa/glm_dsa_attention.h"
#include "models/glm_dsa/glm_dsa_ffn.h"
#include "models/glm_dsa/glm_dsa_hparams.h"
#include "models/glm_dsa/glm_dsa_ops.h"
#include "models/glm_dsa/glm_dsa_state.h"
#include "models/glm_dsa/glm_dsa_weights.h"

namespace ds4 {
namespace {

// Sequences one state holds: any number the memory allows; this bounds a
// typo's allocation.
constexpr int kMaxGlmDsaSlots = 4096;

class GlmDsa final : public Model {
public:
    GlmDsa(const GgufFile& file, ModelMap& map, const LoadOptions& opts) {
        hp_ = read_glm_dsa_hparams(file);
        const LayerRange range = layer_range(opts, hp_.n_layer, file.path());
        first_ = range.begin;
        last_ = range.end;
        // A shared-indexer block reuses the selection of the full block
        // before it, which another stage computed and does not send on.
        if (first_ < last_ && !hp_.indexer_full[size_t(first_)]) {
            int full = first_;
            while (full > 0 && !hp_.indexer_full[size_t(full)]) --full;
            throw Error(file.path() + ": layers " + range.spelling(hp_.n_layer) + " start at block " +
                        std::to_string(first_) + ", which reuses the lightning indexer of block " +
                        std::to_string(full) + "; a stage must start at a block with its own indexer.");
        }
        w_ = bind_glm_dsa_weights(file, map, hp_, first_, last_, range.has_output(hp_.n_layer), opts.resident_experts);
        info_.arch = "glm-dsa";
        info_.name = file.get_string("general.name").value_or("");
        info_.n_vocab = hp_.n_vocab;
        info_.n_embd = hp_.n_embd;
        info_.n_layer = hp_.n_layer;
        info_.layers = range;
        info_.n_ctx_train = hp_.n_ctx_train;
    }

    const ModelInfo& info() const override { return info_; }

    int max_slots() const override { return kMaxGlmDsaSlots; }

    std::unique_ptr<ModelState> new_state(Backend& be, int64_t n_ctx, int n_slots) const override {
        if (n_slots < 1 || n_slots > kMaxGlmDsaSlots)
            throw Error("a GLM-5 state holds 1 to " + std::to_string(kMaxGlmDsaSlots) + " sequences, not " +
                        std::to_string(n_slots) + ".");
        auto st = std::make_unique<GlmDsaState>();
        st->ctx = n_ctx;
        st->slots = n_slots;
        const int64_t rows = n_slots * n_ctx;
        for (int l = first_; l < last_; ++l) {
            GlmDsaLayerState ls;
            ls.latent = be.alloc(rows, hp_.kv_lora_rank);
            ls.pe = be.alloc(rows, hp_.n_rot);
            st->size += sizeof(float) * uint64_t(ls.latent.size() + ls.pe.size());
            if (hp_.indexer_full[size_t(l)]) {
                ls.indexer_keys = be.alloc(rows, hp_.indexer_head_dim);
                st->size += sizeof(float) * uint64_t(ls.indexer_keys.size());
            }
            st->layers.push_back(std::move(ls));
        }
        return st;
    }

    // Every op reads the step's positions, slots and row sets (the causal
    // sets, the indexer's choice, the routing) from backend memory and the
    // ops issued depend on the batch's shape only; the experts come from a
    // source that may read routes on the host (streaming), which says so.
    bool replayable_decode() const override { return expert_source().replayable(); }

    int64_t hidden_cols() const override { return hp_.n_embd; }

    std::vector<RoutedExperts> routed_experts() const override {
        std::vector<RoutedExperts> all;
        for (int l = first_; l < last_; ++l)  // the leading dense blocks have none
            if (l >= hp_.n_dense_lead) all.push_back(w_.layers[size_t(l - first_)].experts);
        return all;
    }

    // Rows of any sequences: attention and the indexer read each row's own
    // slot of the caches; everything else treats the rows alike.
    Tensor forward(Backend& be, ModelState& state_base, const Batch& in, const Tensor* hidden_in) const override {
        auto& state = static_cast<GlmDsaState&>(state_base);
        const int64_t n = in.n, E = hp_.n_embd;
        check_stage_input(info_, hidden_in, n, E);
        if (n <= 0) throw Error("GLM-5: an empty batch.");
        Tensor x = be.alloc(n, E), h = be.alloc(n, E);
        if (hidden_in) be.copy(*hidden_in, x);
        else be.get_rows(w_.tok_embd, in.token_ids, x);

        const RowSets visible = glm_dsa_ops(be).plan_causal(in.cache, n);
        std::optional<RowSets> selected;  // the last full indexer's choice, for shared blocks
        for (int l = first_; l < last_; ++l) {
            const GlmDsaLayerWeights& L = w_.layers[size_t(l - first_)];
            GlmDsaLayerState& st = state.layers[size_t(l - first_)];
            be.rms_norm(x, &L.attn_norm, hp_.rms_eps, E, h);
            Tensor qr = be.alloc(n, hp_.q_lora_rank);
            be.matmul(L.wq_a, h, qr);
            be.rms_norm(qr, &L.q_a_norm, hp_.rms_eps, hp_.q_lora_rank, qr);
            if (hp_.indexer_full[size_t(l)]) selected = glm_indexer_select(be, hp_, L, st, in.cache, visible, qr, h);
            const Tensor attn = glm_attention(be, hp_, L, st, in.cache, *selected, qr, h);
            be.add(x, attn, x);

            be.rms_norm(x, &L.ffn_norm, hp_.rms_eps, E, h);
            // The next block's router, for the lookahead (a dense lead block has none).
            const GlmDsaLayerWeights* next =
                l + 1 < last_ && l + 1 >= hp_.n_dense_lead ? &w_.layers[size_t(l + 1 - first_)] : nullptr;
            const Tensor ffn = glm_ffn(be, hp_, L, l, h, expert_source(), next);
            be.add(x, ffn, x);
        }
        // Without the head here, the next stage (or the coordinator that
        // owns the head) continues from here.
        if (!info_.layers.head_follows_blocks(hp_.n_layer)) return x;
        return head(be, x, in.logit_rows, in.n_logits);
    }

    Tensor head(Backend& be, const Tensor& x, const IntArray& logit_rows, int64_t n_logits) const override {
        check_owns_head(info_);
        const int64_t E = hp_.n_embd;
        Tensor last = be.alloc(n_logits, E);
        be.gather_rows(x, logit_rows, last);
        be.rms_norm(last, &w_.output_norm, hp_.rms_eps, E, last);
        Tensor logits = be.alloc(last.rows, hp_.n_vocab);
        be.matmul(w_.output, last, logits);
        return logits;
    }

private:
    GlmDsaHparams hp_;
    int first_ = 0, last_ = 0;
    GlmDsaWeights w_;
    ModelInfo info_;
};

}  // namespace

std::unique_ptr<Model> load_glm_dsa(const GgufFile& file, ModelMap& map, const LoadOptions& opts) {
    return std::make_unique<GlmDsa>(file, map, opts);
}

}  // namespace ds4

#include "models/qwen3moe/qwen3moe.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "models/hparams.h"
#include "models/weights.h"

namespace ds4 {
namespace {

struct Qwen3MoeHparams {
    int64_t n_vocab, n_embd, n_ctx_train;
    int n_layer, n_head, n_head_kv, head_dim_k, head_dim_v, n_expert, n_expert_used;
    int64_t n_ff_exp;
    float rms_eps, expert_weights_scale;
    RopeParams rope;
};

// Optional companions llama.cpp applies when present: biases after the
// projection and ".scale" multipliers on its output (converted FP8/NVFP4
// checkpoints carry them; published bf16-derived files do not).
struct Projection {
    WeightRef w, bias, scale;
};

struct Layer {
    WeightRef attn_norm, q_norm, k_norm, ffn_norm, gate_inp;
    Projection q, k, v, o;
    RoutedExperts experts;  // with their optional per-expert output scales
};

// Per layer one K and one V cache for all sequence slots: slot s owns rows
// [s * ctx, (s + 1) * ctx).
class Qwen3MoeState final : public ModelState {
public:
    std::vector<Tensor> k, v;
    int64_t ctx = 0;
    int slots = 1;
    uint64_t size = 0;
    int64_t n_ctx() const override { return ctx; }
    int n_slots() const override { return slots; }
    uint64_t bytes() const override { return size; }
    std::vector<Tensor> slot_tensors(int slot, int64_t n_past) override {
        const int64_t rows = std::clamp<int64_t>(n_past, 0, ctx);  // cache row = position
        std::vector<Tensor> views;
        for (size_t l = 0; l < k.size(); ++l) {
            views.push_back(k[l].row_view(slot * ctx, rows));
            views.push_back(v[l].row_view(slot * ctx, rows));
        }
        return views;
    }
};

// Sequences one Qwen3-MoE state holds: any number the memory allows; this
// bounds a typo's allocation.
constexpr int kMaxQwen3MoeSlots = 4096;

class Qwen3Moe final : public Model {
public:
    Qwen3Moe(const GgufFile& file, ModelMap& map, const LoadOptions& opts) { load(file, map, opts); }

    const ModelInfo& info() const override { return info_; }

    int max_slots() const override { return kMaxQwen3MoeSlots; }

    std::unique_ptr<ModelState> new_state(Backend& backend, int64_t n_ctx, int n_slots) const override {
        if (n_slots < 1 || n_slots > kMaxQwen3MoeSlots)
            throw Error("a Qwen3-MoE state holds 1 to " + std::to_string(kMaxQwen3MoeSlots) + " sequences, not " +
                        std::to_string(n_slots) + ".");
        auto st = std::make_unique<Qwen3MoeState>();
        st->ctx = n_ctx;
        st->slots = n_slots;
        for (size_t l = 0; l < layers_.size(); ++l) {
            st->k.push_back(backend.alloc(n_slots * n_ctx, int64_t(hp_.n_head_kv) * hp_.head_dim_k));
            st->v.push_back(backend.alloc(n_slots * n_ctx, int64_t(hp_.n_head_kv) * hp_.head_dim_v));
            st->size += sizeof(float) * (st->k.back().size() + st->v.back().size());
        }
        return st;
    }

    // Every decision is on the device, unless the expert source reads the
    // routing back.
    bool replayable_decode() const override { return expert_source().replayable(); }

    std::vector<RoutedExperts> routed_experts() const override {
        std::vector<RoutedExperts> all;
        for (const Layer& L : layers_) all.push_back(L.experts);
        return all;
    }

    // Rows of any sequences: attention reads each row's own slot of the
    // caches; everything else treats the rows alike, so the weights are
    // read once for the whole batch.
    int64_t hidden_cols() const override { return hp_.n_embd; }

    Tensor forward(Backend& be, ModelState& state_base, const Batch& in, const Tensor* hidden_in) const override {
        auto& state = static_cast<Qwen3MoeState&>(state_base);
        const int64_t n = in.n;
        const int64_t E = hp_.n_embd;
        check_stage_input(info_, hidden_in, n, E);
        const int64_t q_dim = int64_t(hp_.n_head) * hp_.head_dim_k;
        const int64_t k_dim = int64_t(hp_.n_head_kv) * hp_.head_dim_k;
        const int64_t v_dim = int64_t(hp_.n_head_kv) * hp_.head_dim_v;
        const int64_t o_dim = int64_t(hp_.n_head) * hp_.head_dim_v;

        AttentionParams ap;
        ap.n_head = hp_.n_head;
        ap.n_head_kv = hp_.n_head_kv;
        ap.head_dim_k = hp_.head_dim_k;
        ap.head_dim_v = hp_.head_dim_v;
        ap.scale = 1.0f / std::sqrt(static_cast<float>(hp_.head_dim_k));

        Tensor x = be.alloc(n, E), h = be.alloc(n, E);
        Tensor q = be.alloc(n, q_dim), k = be.alloc(n, k_dim), v = be.alloc(n, v_dim);
        Tensor attn = be.alloc(n, o_dim), proj = be.alloc(n, E), router = be.alloc(n, hp_.n_expert);
        if (hidden_in) be.copy(*hidden_in, x);
        else be.get_rows(tok_embd_, in.token_ids, x);

        for (size_t l = 0; l < layers_.size(); ++l) {
            const Layer& L = layers_[l];
            // The previous block's MoE output joins the residual in the same
            // pass as this block's norm.
            if (l == 0) be.rms_norm(x, &L.attn_norm, hp_.rms_eps, E, h);
            else be.add_rms_norm(x, proj, &L.attn_norm, hp_.rms_eps, h);
            project3(be, h, L.q, q, L.k, k, L.v, v);
            be.qk_norm_rope_store(q, k, v, L.q_norm, L.k_norm, hp_.rms_eps, hp_.head_dim_k, hp_.rope, state.k[l],
                                  state.v[l], in.cache);
            {
                // Read after the attention, which reads none: on their way meanwhile.
                const WeightRef* soon[2] = {&L.o.w, &L.gate_inp};
                be.prefetch(soon, 2);
            }
            be.attention(q, state.k[l], state.v[l], in.cache, ap, attn);
            project(be, L.o, attn, proj);

            be.add_rms_norm(x, proj, &L.ffn_norm, hp_.rms_eps, h);
            Routing r = be.router_softmax_topk(L.gate_inp, h, router, hp_.n_expert_used, true, hp_.expert_weights_scale);
            const ExpertMatrices m = expert_source().resolve(be, L.experts, r);
            if (l + 1 < layers_.size()) {
                // The next block's first products, while the experts run.
                const Layer& N = layers_[l + 1];
                const WeightRef* soon[3] = {&N.q.w, &N.k.w, &N.v.w};
                be.prefetch(soon, 3);
            }
            be.moe_swiglu(h, r, m.gate, m.up, m.down, m.scale_of(m.gate_scale), m.scale_of(m.up_scale),
                          m.scale_of(m.down_scale), proj);
            if (l + 1 < layers_.size() && expert_source().wants_lookahead(n)) {
                // Router lookahead: the next block's router on this block's
                // FFN input guesses its experts, read while its attention runs.
                const Layer& N = layers_[l + 1];
                const Routing guess =
                    be.router_softmax_topk(N.gate_inp, h, router, hp_.n_expert_used, true, hp_.expert_weights_scale);
                expert_source().prefetch(be, N.experts, guess);
            }
        }
        if (!layers_.empty()) be.add(x, proj, x);  // the last block's MoE output
        // Without the head here, the next stage (or the coordinator that
        // owns the head) continues from here.
        if (!info_.layers.head_follows_blocks(info_.n_layer)) return x;
        return head(be, x, in.logit_rows, in.n_logits);
    }

    Tensor head(Backend& be, const Tensor& x, const IntArray& logit_rows, int64_t n_logits) const override {
        check_owns_head(info_);
        const int64_t E = hp_.n_embd;
        Tensor last = be.alloc(n_logits, E);
        be.gather_rows(x, logit_rows, last);
        Tensor normed = be.alloc(last.rows, E);
        be.rms_norm(last, &output_norm_, hp_.rms_eps, E, normed);
        Tensor logits = be.alloc(last.rows, hp_.n_vocab);
        be.matmul(output_, normed, logits);
        if (output_scale_) be.mul_row(logits, output_scale_);
        return logits;
    }

private:
    static void project(Backend& be, const Projection& p, const Tensor& in, Tensor& out) {
        be.matmul(p.w, in, out);
        scale_and_bias(be, p, out);
    }
    // Three projections of one input (q, k, v): the backend prepares it once.
    static void project3(Backend& be, const Tensor& in, const Projection& p0, Tensor& o0, const Projection& p1,
                         Tensor& o1, const Projection& p2, Tensor& o2) {
        const WeightRef* w[3] = {&p0.w, &p1.w, &p2.w};
        Tensor* y[3] = {&o0, &o1, &o2};
        be.matmuls(in, w, y, 3);
        scale_and_bias(be, p0, o0);
        scale_and_bias(be, p1, o1);
        scale_and_bias(be, p2, o2);
    }
    static void scale_and_bias(Backend& be, const Projection& p, Tensor& out) {
        if (p.scale) be.mul_row(out, p.scale);
        if (p.bias) be.add_row(out, p.bias);
    }

    void load(const GgufFile& f, ModelMap& map, const LoadOptions& opts) {
        Hparams hp(f, "qwen3moe");
        auto key = [&](const char* k) { return hp.quoted(k); };
        hp_.n_embd = hp.count("embedding_length");
        hp_.n_layer = static_cast<int>(hp.count("block_count"));
        hp_.n_ctx_train = hp.count_or("context_length", 0, 0, kMaxHparamContext);
        hp_.n_head = static_cast<int>(hp.count("attention.head_count"));
        hp_.n_head_kv = static_cast<int>(hp.count_or("attention.head_count_kv", hp_.n_head));
        if (hp_.n_head % hp_.n_head_kv != 0)
            throw Error(f.path() + ": metadata key " + key("attention.head_count") + " (" + std::to_string(hp_.n_head) +
                        ") is not a multiple of " + key("attention.head_count_kv") + " (" +
                        std::to_string(hp_.n_head_kv) + ").");
        // Without key/value lengths a head is an equal share of the embedding.
        const bool head_dims_given = f.find(hp.key("attention.key_length")) && f.find(hp.key("attention.value_length"));
        if (!head_dims_given && hp_.n_embd % hp_.n_head != 0)
            throw Error(f.path() + ": metadata key " + key("embedding_length") + " (" + std::to_string(hp_.n_embd) +
                        ") does not split into " + key("attention.head_count") + " (" + std::to_string(hp_.n_head) +
                        ") heads, and the file gives no head length (" + key("attention.key_length") + ").");
        hp_.head_dim_k = static_cast<int>(hp.count_or("attention.key_length", hp_.n_embd / hp_.n_head));
        hp_.head_dim_v = static_cast<int>(hp.count_or("attention.value_length", hp_.n_embd / hp_.n_head));
        hp_.n_expert = static_cast<int>(hp.count("expert_count"));
        hp_.n_expert_used = static_cast<int>(hp.count("expert_used_count"));
        if (hp_.n_expert_used > hp_.n_expert)
            throw Error(f.path() + ": metadata key " + key("expert_used_count") + " (" +
                        std::to_string(hp_.n_expert_used) + ") exceeds " + key("expert_count") + " (" +
                        std::to_string(hp_.n_expert) + ").");
        hp_.rms_eps = static_cast<float>(hp.number_or("attention.layer_norm_rms_epsilon", 1e-6, NumberRange::NonNegative));
        hp_.expert_weights_scale = static_cast<float>(hp.number_or("expert_weights_scale", 0.0, NumberRange::NonNegative));
        const int n_rot = static_cast<int>(hp.count_or("rope.dimension_count", hp_.head_dim_k));
        if (n_rot != hp_.head_dim_k || hp_.head_dim_k != hp_.head_dim_v || n_rot % 2 != 0)
            throw Error(f.path() + ": qwen3moe needs " + key("rope.dimension_count") + " == " +
                        key("attention.key_length") + " == " + key("attention.value_length") + ", even (got " +
                        std::to_string(n_rot) + ", " + std::to_string(hp_.head_dim_k) + ", " +
                        std::to_string(hp_.head_dim_v) + ").");
        hp_.rope = rope_params_from_metadata(hp, n_rot, /*neox=*/true);

        WeightBinder wb(f, map);
        hp_.n_vocab = bind_vocab_size(hp, wb);
        // Expected sizes with the metadata they come from, for messages.
        const std::string heads = key("attention.head_count"), kv_heads = key("attention.head_count_kv");
        const std::string k_len = key("attention.key_length"), v_len = key("attention.value_length");
        const Dim E{hp_.n_embd, key("embedding_length")};
        const Dim V{hp_.n_vocab, "the rows of 'token_embd.weight'"};
        const Dim Q{int64_t(hp_.n_head) * hp_.head_dim_k, heads + " x " + k_len};
        const Dim K{int64_t(hp_.n_head_kv) * hp_.head_dim_k, kv_heads + " x " + k_len};
        const Dim Vd{int64_t(hp_.n_head_kv) * hp_.head_dim_v, kv_heads + " x " + v_len};
        const Dim O{int64_t(hp_.n_head) * hp_.head_dim_v, heads + " x " + v_len};
        const Dim head{hp_.head_dim_k, k_len};
        const Dim X{hp_.n_expert, key("expert_count")};
        const bool ff_given = f.find(hp.key("expert_feed_forward_length")) != nullptr;

        // A stage binds the embedding only when it starts at block 0, the
        // head only when it owns it (tied embeddings: the
        // embedding serves as the head there too).
        const LayerRange range = layer_range(opts, hp_.n_layer, f.path());
        const int first = range.begin, last = range.end;
        const bool embeds = range.has_embedding(), has_head = range.has_output(hp_.n_layer);
        const bool tied = f.find_tensor("output.weight") == nullptr;
        wb.bind_data(embeds || (has_head && tied));
        tok_embd_ = wb.require("token_embd.weight", {E, V});
        wb.bind_data(has_head);
        output_norm_ = wb.require("output_norm.weight", {E});
        output_ = tied ? tok_embd_ : wb.require("output.weight", {E, V});
        output_scale_ = wb.optional_scale("output.scale", 1);
        wb.bind_data(true);
        wb.experts_resident(opts.resident_experts);
        for (int l = first; l < last; ++l) {
            const std::string p = "blk." + std::to_string(l) + ".";
            if (f.find_tensor(p + "attn_qkv.weight"))
                throw Error(f.path() + ": fused '" + p + "attn_qkv.weight' is not supported for qwen3moe; expected separate q/k/v.");
            Layer L;
            L.attn_norm = wb.require(p + "attn_norm.weight", {E});
            auto proj = [&](const std::string& name, const Dim& in, const Dim& out) {
                Projection pr;
                pr.w = wb.require(p + name + ".weight", {in, out});
                pr.bias = wb.optional(p + name + ".bias", {out});
                pr.scale = wb.optional_scale(p + name + ".scale", 1);
                return pr;
            };
            L.q = proj("attn_q", E, Q);
            L.k = proj("attn_k", E, K);
            L.v = proj("attn_v", E, Vd);
            L.o = proj("attn_output", O, E);
            L.q_norm = wb.require(p + "attn_q_norm.weight", {head});
            L.k_norm = wb.require(p + "attn_k_norm.weight", {head});
            L.ffn_norm = wb.require(p + "ffn_norm.weight", {E});
            L.gate_inp = wb.require(p + "ffn_gate_inp.weight", {E, X});
            // The expert width: stated by the file, or that of this layer's tensors.
            const std::string gate = p + "ffn_gate_exps.weight";
            hp_.n_ff_exp = ff_given ? hp.count("expert_feed_forward_length") : wb.dim(gate, 1);
            const Dim F{hp_.n_ff_exp, ff_given ? key("expert_feed_forward_length") : "dimension 1 of '" + gate + "'"};
            RoutedExperts& ex = L.experts;
            ex.layer = l;
            ex.gate = wb.require(gate, {E, F, X});
            ex.up = wb.require(p + "ffn_up_exps.weight", {E, F, X});
            ex.down = wb.require(p + "ffn_down_exps.weight", {F, E, X});
            ex.gate_scale = wb.optional_scale(p + "ffn_gate_exps.scale", X);
            ex.up_scale = wb.optional_scale(p + "ffn_up_exps.scale", X);
            ex.down_scale = wb.optional_scale(p + "ffn_down_exps.scale", X);
            layers_.push_back(std::move(L));
        }
        info_.arch = "qwen3moe";
        info_.name = f.get_string("general.name").value_or("");
        info_.n_vocab = hp_.n_vocab;
        info_.n_embd = hp_.n_embd;
        info_.n_layer = hp_.n_layer;
        info_.layers = range;
        info_.n_ctx_train = hp_.n_ctx_train;
    }

    Qwen3MoeHparams hp_{};
    ModelInfo info_;
    WeightRef tok_embd_, output_norm_, output_, output_scale_;
    std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_qwen3moe(const GgufFile& file, ModelMap& map, const LoadOptions& opts) {
    return std::make_unique<Qwen3Moe>(file, map, opts);
}

}  // namespace ds4

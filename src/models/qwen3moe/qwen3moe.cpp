#include "models/qwen3moe/qwen3moe.h"

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
    WeightRef gate_exps, up_exps, down_exps;
    WeightRef gate_exps_scale, up_exps_scale, down_exps_scale;
};

class Qwen3MoeState final : public ModelState {
public:
    std::vector<Tensor> k, v;
    int64_t ctx = 0;
    uint64_t size = 0;
    int64_t n_ctx() const override { return ctx; }
    uint64_t bytes() const override { return size; }
    std::vector<Tensor*> tensors() override {
        std::vector<Tensor*> all;
        for (size_t l = 0; l < k.size(); ++l) {
            all.push_back(&k[l]);
            all.push_back(&v[l]);
        }
        return all;
    }
};

class Qwen3Moe final : public Model {
public:
    Qwen3Moe(const GgufFile& file, ModelMap& map, const LoadOptions& opts) { load(file, map, opts); }

    const ModelInfo& info() const override { return info_; }

    std::unique_ptr<ModelState> new_state(Backend& backend, int64_t n_ctx) const override {
        auto st = std::make_unique<Qwen3MoeState>();
        st->ctx = n_ctx;
        for (size_t l = 0; l < layers_.size(); ++l) {
            st->k.push_back(backend.alloc(n_ctx, int64_t(hp_.n_head_kv) * hp_.head_dim_k));
            st->v.push_back(backend.alloc(n_ctx, int64_t(hp_.n_head_kv) * hp_.head_dim_v));
            st->size += sizeof(float) * (st->k.back().size() + st->v.back().size());
        }
        return st;
    }

    bool replayable_decode() const override { return true; }

    Tensor forward(Backend& be, ModelState& state_base, const StepInputs& in, bool all_logits) const override {
        auto& state = static_cast<Qwen3MoeState&>(state_base);
        const int64_t n = in.n;
        if (in.pos0 + n > state.ctx)
            throw Error("the context of " + std::to_string(state.ctx) + " tokens is full (position " +
                        std::to_string(in.pos0 + n) + " requested); raise --ctx.");
        const int64_t E = hp_.n_embd;
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
        be.get_rows(tok_embd_, in.token_ids, x);

        for (size_t l = 0; l < layers_.size(); ++l) {
            const Layer& L = layers_[l];
            be.rms_norm(x, &L.attn_norm, hp_.rms_eps, E, h);
            project(be, L.q, h, q);
            project(be, L.k, h, k);
            project(be, L.v, h, v);
            be.rms_norm(q, &L.q_norm, hp_.rms_eps, hp_.head_dim_k, q);
            be.rms_norm(k, &L.k_norm, hp_.rms_eps, hp_.head_dim_k, k);
            be.rope(q, hp_.head_dim_k, in.positions, hp_.rope);
            be.rope(k, hp_.head_dim_k, in.positions, hp_.rope);
            be.kv_store(state.k[l], state.v[l], k, v, in.positions);
            be.attention(q, state.k[l], state.v[l], in.positions, ap, attn);
            project(be, L.o, attn, proj);
            be.add(x, proj, x);

            be.rms_norm(x, &L.ffn_norm, hp_.rms_eps, E, h);
            be.matmul(L.gate_inp, h, router);
            const Routing r = be.route_softmax_topk(router, hp_.n_expert_used, true, hp_.expert_weights_scale);
            be.moe_swiglu(h, r, L.gate_exps, L.up_exps, L.down_exps, opt(L.gate_exps_scale), opt(L.up_exps_scale),
                          opt(L.down_exps_scale), proj);
            be.add(x, proj, x);
        }

        const Tensor last = all_logits ? x : x.row_view(n - 1, 1);
        Tensor normed = be.alloc(last.rows, E);
        be.rms_norm(last, &output_norm_, hp_.rms_eps, E, normed);
        Tensor logits = be.alloc(last.rows, hp_.n_vocab);
        be.matmul(output_, normed, logits);
        if (output_scale_) be.mul_row(logits, output_scale_);
        return logits;
    }

private:
    static const WeightRef* opt(const WeightRef& w) { return w ? &w : nullptr; }

    static void project(Backend& be, const Projection& p, const Tensor& in, Tensor& out) {
        be.matmul(p.w, in, out);
        if (p.scale) be.mul_row(out, p.scale);
        if (p.bias) be.add_row(out, p.bias);
    }

    void load(const GgufFile& f, ModelMap& map, const LoadOptions& opts) {
        Hparams hp(f, "qwen3moe");
        hp_.n_embd = static_cast<int64_t>(hp.require_uint("embedding_length"));
        hp_.n_layer = static_cast<int>(hp.require_uint("block_count"));
        hp_.n_ctx_train = static_cast<int64_t>(hp.uint_or("context_length", 0));
        hp_.n_head = static_cast<int>(hp.require_uint("attention.head_count"));
        hp_.n_head_kv = static_cast<int>(hp.uint_or("attention.head_count_kv", static_cast<uint64_t>(hp_.n_head)));
        if (hp_.n_head <= 0 || hp_.n_head_kv <= 0 || hp_.n_head % hp_.n_head_kv != 0)
            throw Error(f.path() + " has " + std::to_string(hp_.n_head) + " attention heads and " +
                        std::to_string(hp_.n_head_kv) + " KV heads; the first must be a multiple of the second.");
        hp_.head_dim_k = static_cast<int>(hp.uint_or("attention.key_length", hp_.n_embd / hp_.n_head));
        hp_.head_dim_v = static_cast<int>(hp.uint_or("attention.value_length", hp_.n_embd / hp_.n_head));
        hp_.n_expert = static_cast<int>(hp.require_uint("expert_count"));
        hp_.n_expert_used = static_cast<int>(hp.require_uint("expert_used_count"));
        if (hp_.n_expert <= 0 || hp_.n_expert_used <= 0 || hp_.n_expert_used > hp_.n_expert)
            throw Error(f.path() + " routes " + std::to_string(hp_.n_expert_used) + " of " + std::to_string(hp_.n_expert) +
                        " experts per token; need 0 < used <= count.");
        hp_.rms_eps = static_cast<float>(hp.float_or("attention.layer_norm_rms_epsilon", 1e-6));
        hp_.expert_weights_scale = static_cast<float>(hp.float_or("expert_weights_scale", 0.0));
        const int n_rot = static_cast<int>(hp.uint_or("rope.dimension_count", static_cast<uint64_t>(hp_.head_dim_k)));
        if (n_rot != hp_.head_dim_k || hp_.head_dim_k != hp_.head_dim_v)
            throw Error(f.path() + ": qwen3moe needs rope dimensions == key length == value length (got " +
                        std::to_string(n_rot) + ", " + std::to_string(hp_.head_dim_k) + ", " +
                        std::to_string(hp_.head_dim_v) + ").");
        hp_.rope = rope_params_from_metadata(hp, n_rot, /*neox=*/true);

        WeightBinder wb(f, map);
        const GgufTensorInfo& emb = f.require_tensor("token_embd.weight");
        hp_.n_vocab = emb.ne[1];
        tok_embd_ = wb.require("token_embd.weight", {hp_.n_embd, hp_.n_vocab});
        output_norm_ = wb.require("output_norm.weight", {hp_.n_embd});
        output_ = wb.optional("output.weight", {hp_.n_embd, hp_.n_vocab});
        if (!output_) output_ = tok_embd_;  // tied embeddings
        output_scale_ = wb.optional_scale("output.scale", 1);

        const int64_t E = hp_.n_embd;
        const int64_t q_dim = int64_t(hp_.n_head) * hp_.head_dim_k;
        const int64_t kv_dim = int64_t(hp_.n_head_kv) * hp_.head_dim_k;
        const auto [first, last] = layer_range(opts, hp_.n_layer, f.path());
        for (int l = first; l < last; ++l) {
            const std::string p = "blk." + std::to_string(l) + ".";
            if (f.find_tensor(p + "attn_qkv.weight"))
                throw Error(f.path() + ": fused '" + p + "attn_qkv.weight' is not supported for qwen3moe; expected separate q/k/v.");
            Layer L;
            L.attn_norm = wb.require(p + "attn_norm.weight", {E});
            auto proj = [&](const std::string& name, int64_t in, int64_t out) {
                Projection pr;
                pr.w = wb.require(p + name + ".weight", {in, out});
                pr.bias = wb.optional(p + name + ".bias", {out});
                pr.scale = wb.optional_scale(p + name + ".scale", 1);
                return pr;
            };
            L.q = proj("attn_q", E, q_dim);
            L.k = proj("attn_k", E, kv_dim);
            L.v = proj("attn_v", E, int64_t(hp_.n_head_kv) * hp_.head_dim_v);
            L.o = proj("attn_output", int64_t(hp_.n_head) * hp_.head_dim_v, E);
            L.q_norm = wb.require(p + "attn_q_norm.weight", {hp_.head_dim_k});
            L.k_norm = wb.require(p + "attn_k_norm.weight", {hp_.head_dim_k});
            L.ffn_norm = wb.require(p + "ffn_norm.weight", {E});
            L.gate_inp = wb.require(p + "ffn_gate_inp.weight", {E, hp_.n_expert});
            const GgufTensorInfo& ge = f.require_tensor(p + "ffn_gate_exps.weight");
            hp_.n_ff_exp = ge.ne[1];
            L.gate_exps = wb.require(p + "ffn_gate_exps.weight", {E, hp_.n_ff_exp, hp_.n_expert});
            L.up_exps = wb.require(p + "ffn_up_exps.weight", {E, hp_.n_ff_exp, hp_.n_expert});
            L.down_exps = wb.require(p + "ffn_down_exps.weight", {hp_.n_ff_exp, E, hp_.n_expert});
            L.gate_exps_scale = wb.optional_scale(p + "ffn_gate_exps.scale", hp_.n_expert);
            L.up_exps_scale = wb.optional_scale(p + "ffn_up_exps.scale", hp_.n_expert);
            L.down_exps_scale = wb.optional_scale(p + "ffn_down_exps.scale", hp_.n_expert);
            layers_.push_back(std::move(L));
        }
        info_.arch = "qwen3moe";
        info_.name = f.get_string("general.name").value_or("");
        info_.n_vocab = hp_.n_vocab;
        info_.n_embd = hp_.n_embd;
        info_.n_layer = hp_.n_layer;
        info_.layer_begin = first;
        info_.layer_end = last;
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

#include "models/deepseek4/dsv4_hparams.h"

#include <cmath>

#include "common/error.h"
#include "models/hparams.h"

namespace ds4 {

namespace {

const char* kArch = "deepseek4";

std::string key(const std::string& k) { return std::string(kArch) + "." + k; }

// A per-layer float key: an array with one value per layer, or one scalar for all.
std::vector<float> per_layer_floats(const GgufFile& f, const std::string& k, int n_layer, std::vector<float> dflt) {
    const GgufValue* v = f.find(key(k));
    if (!v) return dflt;
    std::vector<float> out;
    if (v->type == GgufValueType::ARRAY) {
        if (static_cast<int>(v->array_size()) < n_layer)
            throw Error(f.path() + ": '" + key(k) + "' has " + std::to_string(v->array_size()) + " values for " +
                        std::to_string(n_layer) + " layers.");
        for (int l = 0; l < n_layer; ++l)
            out.push_back(static_cast<float>(v->floats.empty() ? double(v->ints[l]) : v->floats[l]));
    } else {
        out.assign(static_cast<size_t>(n_layer), static_cast<float>(*f.get_float(key(k))));
    }
    return out;
}

}  // namespace

Dsv4Hparams read_dsv4_hparams(const GgufFile& f) {
    Hparams hp(f, kArch);
    Dsv4Hparams h;
    h.n_embd = static_cast<int64_t>(hp.require_uint("embedding_length"));
    const int n_layer_all = static_cast<int>(hp.require_uint("block_count"));
    const int n_nextn = static_cast<int>(hp.uint_or("nextn_predict_layers", 0));
    h.n_layer = n_layer_all;
    // Like llama.cpp: MTP layers count only when their tensors are present.
    if (n_nextn > 0 && n_nextn < n_layer_all &&
        f.find_tensor("blk." + std::to_string(n_layer_all - n_nextn) + ".nextn.eh_proj.weight"))
        h.n_layer = n_layer_all - n_nextn;
    h.n_ctx_train = static_cast<int64_t>(hp.uint_or("context_length", 0));
    h.n_head = static_cast<int>(hp.require_uint("attention.head_count"));
    h.head_dim = static_cast<int>(hp.require_uint("attention.key_length"));
    const int v_len = static_cast<int>(hp.uint_or("attention.value_length", static_cast<uint64_t>(h.head_dim)));
    if (v_len != h.head_dim)
        throw Error(f.path() + ": deepseek4 needs key length == value length (got " + std::to_string(h.head_dim) + " and " +
                    std::to_string(v_len) + ").");
    h.n_rot = static_cast<int>(hp.uint_or("rope.dimension_count", static_cast<uint64_t>(h.head_dim)));
    h.q_lora_rank = static_cast<int64_t>(hp.require_uint("attention.q_lora_rank"));
    h.n_swa = static_cast<int64_t>(hp.require_uint("attention.sliding_window"));
    h.n_expert = static_cast<int>(hp.require_uint("expert_count"));
    h.n_expert_used = static_cast<int>(hp.require_uint("expert_used_count"));
    h.n_expert_shared = static_cast<int>(hp.require_uint("expert_shared_count"));
    h.expert_weights_scale = static_cast<float>(hp.float_or("expert_weights_scale", 1.0));
    h.expert_weights_norm = hp.bool_or("expert_weights_norm", true);
    h.swiglu_clamp_exp = per_layer_floats(f, "swiglu_clamp_exp", n_layer_all, std::vector<float>(n_layer_all, 0.0f));
    h.swiglu_clamp_shexp = per_layer_floats(f, "swiglu_clamp_shexp", n_layer_all, h.swiglu_clamp_exp);
    h.indexer_n_head = static_cast<int>(hp.require_uint("attention.indexer.head_count"));
    h.indexer_head_dim = static_cast<int>(hp.require_uint("attention.indexer.key_length"));
    h.indexer_top_k = static_cast<int64_t>(hp.require_uint("attention.indexer.top_k"));
    h.o_groups = static_cast<int>(hp.require_uint("attention.output_group_count"));
    h.o_lora_rank = static_cast<int64_t>(hp.require_uint("attention.output_lora_rank"));
    h.n_hc = static_cast<int>(hp.require_uint("hyper_connection.count"));
    h.sinkhorn_iters = static_cast<int>(hp.require_uint("hyper_connection.sinkhorn_iterations"));
    h.hc_eps = static_cast<float>(hp.float_or("hyper_connection.epsilon", 1e-6));
    h.n_hash_layers = static_cast<int>(hp.uint_or("hash_layer_count", 0));
    h.rms_eps = static_cast<float>(hp.float_or("attention.layer_norm_rms_epsilon", 1e-6));

    const GgufValue& ratios = f.require_array(key("attention.compress_ratios"));
    if (static_cast<int>(ratios.ints.size()) < n_layer_all)
        throw Error(f.path() + ": '" + key("attention.compress_ratios") + "' is shorter than block_count.");
    for (int l = 0; l < h.n_layer; ++l) {
        const int64_t r = ratios.ints[static_cast<size_t>(l)];
        if (r != 0 && r != kDsv4CsaRatio && r != kDsv4HcaRatio)
            throw Error(f.path() + ": layer " + std::to_string(l) + " has compress ratio " + std::to_string(r) +
                        "; deepseek4 supports 0, 4 and 128.");
        h.compress_ratios.push_back(static_cast<int>(r));
    }
    const uint64_t gating = hp.require_uint("expert_gating_func");
    if (gating != 4)
        throw Error(f.path() + ": deepseek4 expects sqrt-softplus expert gating (expert_gating_func 4), not " +
                    std::to_string(gating) + ".");

    if (h.n_head <= 0 || h.head_dim <= 0 || h.n_rot <= 0 || h.n_rot > h.head_dim || h.n_rot % 2 ||
        h.n_rot > h.indexer_head_dim)
        throw Error(f.path() + ": inconsistent deepseek4 head sizes (heads " + std::to_string(h.n_head) + ", head dim " +
                    std::to_string(h.head_dim) + ", rope dims " + std::to_string(h.n_rot) + ", indexer head dim " +
                    std::to_string(h.indexer_head_dim) + ").");
    if (h.o_groups <= 0 || h.n_head % h.o_groups != 0)
        throw Error(f.path() + ": " + std::to_string(h.n_head) + " heads do not split into " +
                    std::to_string(h.o_groups) + " output groups.");
    if (h.n_hc < 1 || h.sinkhorn_iters < 1)
        throw Error(f.path() + ": deepseek4 needs at least one hyper-connection stream and one Sinkhorn iteration.");
    if (h.n_expert <= 0 || h.n_expert_used <= 0 || h.n_expert_used > h.n_expert)
        throw Error(f.path() + " routes " + std::to_string(h.n_expert_used) + " of " + std::to_string(h.n_expert) +
                    " experts per token; need 0 < used <= count.");
    if (h.n_swa < 1) throw Error(f.path() + ": deepseek4 needs a sliding window of at least one position.");

    // Window-only layers rotate with the plain base frequency; compressed
    // layers (and their compressors and indexer) use the compress base with
    // the file's YaRN scaling, and an attention factor that cancels the
    // kernel's YaRN magnitude correction (llama.cpp dsv4_rope_attn_factor).
    const RopeParams meta = rope_params_from_metadata(hp, h.n_rot, /*neox=*/false);
    h.rope_window.n_rot = h.n_rot;
    h.rope_window.neox = false;
    h.rope_window.freq_base = meta.freq_base;
    h.rope_window.n_ctx_orig = 0;
    h.rope_compress = meta;
    h.rope_compress.freq_base = static_cast<float>(hp.float_or("attention.compress_rope_freq_base", meta.freq_base));
    h.rope_compress.beta_fast = static_cast<float>(hp.float_or("rope.scaling.yarn_beta_fast", 32.0));
    h.rope_compress.beta_slow = static_cast<float>(hp.float_or("rope.scaling.yarn_beta_slow", 1.0));
    if (h.rope_compress.beta_fast <= 0) h.rope_compress.beta_fast = 32.0f;
    if (h.rope_compress.beta_slow <= 0) h.rope_compress.beta_slow = 1.0f;
    h.rope_compress.attn_factor =
        h.rope_compress.ext_factor != 0.0f ? 1.0f / (1.0f + 0.1f * std::log(1.0f / h.rope_compress.freq_scale)) : 1.0f;
    return h;
}

}  // namespace ds4

#include "models/deepseek4/dsv4_hparams.h"

#include <cmath>

#include "common/error.h"
#include "models/hparams.h"

namespace ds4 {

namespace {

const char* kArch = "deepseek4";

// A per-layer float key: an array with a finite number per layer (extra
// entries, e.g. the MTP block's, are ignored), or one scalar for all.
std::vector<float> per_layer_floats(const Hparams& hp, const std::string& k, int n_layer, std::vector<float> dflt) {
    const GgufFile& f = hp.file();
    const GgufValue* v = f.find(hp.key(k));
    if (!v) return dflt;
    const std::string where = f.path() + ": metadata key '" + hp.key(k) + "'";
    if (v->type != GgufValueType::ARRAY)
        return std::vector<float>(static_cast<size_t>(n_layer),
                                  static_cast<float>(hp.number_or(k, 0.0, NumberRange::Any)));
    const bool ints = gguf_value_type_is_integer(v->elem_type) && v->elem_type != GgufValueType::BOOL;
    const bool floats = v->elem_type == GgufValueType::F32 || v->elem_type == GgufValueType::F64;
    if (!ints && !floats)
        throw Error(where + " is an array of " + gguf_value_type_name(v->elem_type) + ", not of numbers.");
    if (static_cast<int64_t>(v->array_size()) < n_layer)
        throw Error(where + " has " + std::to_string(v->array_size()) + " values for " + std::to_string(n_layer) +
                    " layers ('" + hp.key("block_count") + "').");
    std::vector<float> out;
    for (int l = 0; l < n_layer; ++l) {
        const double x = floats ? v->floats[static_cast<size_t>(l)] : double(v->ints[static_cast<size_t>(l)]);
        if (!std::isfinite(x) || !std::isfinite(static_cast<float>(x)))
            throw Error(where + " gives layer " + std::to_string(l) + " the value " + std::to_string(x) +
                        "; it must be a finite number.");
        out.push_back(static_cast<float>(x));
    }
    return out;
}

// The compression ratio of every trunk layer: attention.compress_ratios, an
// integer array with at least one entry per block.
std::vector<int> compress_ratios(const Hparams& hp, int n_layer_all, int n_layer) {
    const GgufFile& f = hp.file();
    const std::string k = hp.key("attention.compress_ratios");
    const GgufValue& ratios = f.require_array(k);
    if (!gguf_value_type_is_integer(ratios.elem_type) || ratios.elem_type == GgufValueType::BOOL)
        throw Error(f.path() + ": metadata key '" + k + "' is an array of " + gguf_value_type_name(ratios.elem_type) +
                    ", not of integers.");
    if (static_cast<int64_t>(ratios.ints.size()) < n_layer_all)
        throw Error(f.path() + ": metadata key '" + k + "' has " + std::to_string(ratios.ints.size()) + " values for " +
                    std::to_string(n_layer_all) + " layers ('" + hp.key("block_count") + "').");
    std::vector<int> out;
    for (int l = 0; l < n_layer; ++l) {
        const int64_t r = ratios.ints[static_cast<size_t>(l)];
        if (r != 0 && r != kDsv4CsaRatio && r != kDsv4HcaRatio)
            throw Error(f.path() + ": metadata key '" + k + "' gives layer " + std::to_string(l) + " compress ratio " +
                        std::to_string(r) + "; deepseek4 supports 0, 4 and 128.");
        out.push_back(static_cast<int>(r));
    }
    return out;
}

}  // namespace

Dsv4Hparams read_dsv4_hparams(const GgufFile& f) {
    Hparams hp(f, kArch);
    auto key = [&](const char* k) { return hp.quoted(k); };
    auto count = [&](const char* k) { return static_cast<int>(hp.count(k)); };
    Dsv4Hparams h;
    h.path = f.path();
    h.n_embd = hp.count("embedding_length");
    const int n_layer_all = count("block_count");
    const int n_nextn = static_cast<int>(hp.count_or("nextn_predict_layers", 0, 0));
    h.n_layer = n_layer_all;
    // Like llama.cpp: MTP layers count only when their tensors are present.
    if (n_nextn > 0 && n_nextn < n_layer_all &&
        f.find_tensor("blk." + std::to_string(n_layer_all - n_nextn) + ".nextn.eh_proj.weight"))
        h.n_layer = n_layer_all - n_nextn;
    h.n_ctx_train = hp.count_or("context_length", 0, 0, kMaxHparamContext);
    h.n_head = count("attention.head_count");
    h.head_dim = count("attention.key_length");
    const int v_len = static_cast<int>(hp.count_or("attention.value_length", h.head_dim));
    if (v_len != h.head_dim)
        throw Error(f.path() + ": deepseek4 needs " + key("attention.key_length") + " (" + std::to_string(h.head_dim) +
                    ") == " + key("attention.value_length") + " (" + std::to_string(v_len) + ").");
    h.n_rot = static_cast<int>(hp.count_or("rope.dimension_count", h.head_dim));
    h.q_lora_rank = hp.count("attention.q_lora_rank");
    h.n_swa = hp.count("attention.sliding_window");
    h.n_expert = count("expert_count");
    h.n_expert_used = count("expert_used_count");
    h.n_expert_shared = count("expert_shared_count");
    h.expert_weights_scale = static_cast<float>(hp.number_or("expert_weights_scale", 1.0, NumberRange::NonNegative));
    h.expert_weights_norm = hp.bool_or("expert_weights_norm", true);
    h.swiglu_clamp_exp = per_layer_floats(hp, "swiglu_clamp_exp", n_layer_all, std::vector<float>(n_layer_all, 0.0f));
    h.swiglu_clamp_shexp = per_layer_floats(hp, "swiglu_clamp_shexp", n_layer_all, h.swiglu_clamp_exp);
    h.indexer_n_head = count("attention.indexer.head_count");
    h.indexer_head_dim = count("attention.indexer.key_length");
    h.indexer_top_k = hp.count("attention.indexer.top_k");
    h.o_groups = count("attention.output_group_count");
    h.o_lora_rank = hp.count("attention.output_lora_rank");
    h.n_hc = count("hyper_connection.count");
    h.sinkhorn_iters = count("hyper_connection.sinkhorn_iterations");
    h.hc_eps = static_cast<float>(hp.number_or("hyper_connection.epsilon", 1e-6, NumberRange::NonNegative));
    h.n_hash_layers = static_cast<int>(hp.count_or("hash_layer_count", 0, 0, n_layer_all));
    h.rms_eps = static_cast<float>(hp.number_or("attention.layer_norm_rms_epsilon", 1e-6, NumberRange::NonNegative));
    h.compress_ratios = compress_ratios(hp, n_layer_all, h.n_layer);
    const int64_t gating = hp.count("expert_gating_func", 0);
    if (gating != 4)
        throw Error(f.path() + ": deepseek4 expects sqrt-softplus expert gating (" + key("expert_gating_func") +
                    " 4), not " + std::to_string(gating) + ".");

    if (h.n_rot > h.head_dim || h.n_rot > h.indexer_head_dim || h.n_rot % 2 != 0)
        throw Error(f.path() + ": metadata key " + key("rope.dimension_count") + " (" + std::to_string(h.n_rot) +
                    ") must be even and at most " + key("attention.key_length") + " (" + std::to_string(h.head_dim) +
                    ") and " + key("attention.indexer.key_length") + " (" + std::to_string(h.indexer_head_dim) + ").");
    if (h.n_head % h.o_groups != 0)
        throw Error(f.path() + ": metadata key " + key("attention.head_count") + " (" + std::to_string(h.n_head) +
                    ") does not split into " + key("attention.output_group_count") + " (" + std::to_string(h.o_groups) +
                    ") groups.");
    if (h.n_expert_used > h.n_expert)
        throw Error(f.path() + ": metadata key " + key("expert_used_count") + " (" + std::to_string(h.n_expert_used) +
                    ") exceeds " + key("expert_count") + " (" + std::to_string(h.n_expert) + ").");

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
    h.rope_compress.freq_base =
        static_cast<float>(hp.number_or("attention.compress_rope_freq_base", meta.freq_base, NumberRange::Positive));
    h.rope_compress.beta_fast = static_cast<float>(hp.number_or("rope.scaling.yarn_beta_fast", 32.0, NumberRange::Any));
    h.rope_compress.beta_slow = static_cast<float>(hp.number_or("rope.scaling.yarn_beta_slow", 1.0, NumberRange::Any));
    if (h.rope_compress.beta_fast <= 0) h.rope_compress.beta_fast = 32.0f;
    if (h.rope_compress.beta_slow <= 0) h.rope_compress.beta_slow = 1.0f;
    h.rope_compress.attn_factor =
        h.rope_compress.ext_factor != 0.0f ? 1.0f / (1.0f + 0.1f * std::log(1.0f / h.rope_compress.freq_scale)) : 1.0f;
    return h;
}

}  // namespace ds4

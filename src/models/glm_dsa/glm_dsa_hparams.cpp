#include "models/glm_dsa/glm_dsa_hparams.h"

#include <cmath>

#include "common/error.h"
#include "models/hparams.h"

namespace ds4 {

namespace {

const char* kArch = "glm-dsa";
// llama.cpp's expert_gating_func values.
constexpr int64_t kGatingSoftmax = 1, kGatingSigmoid = 2;
// GLM-5.2 (trained context >= 1M) files without attention.indexer.types
// get the published schedule: full indexers on blocks 0, 1, 2 and every
// fourth block from 6; earlier GLM-5 files run a full indexer everywhere.
constexpr int64_t kGlm52Context = 1048576;

// (llama.cpp's table has 78 entries; later blocks share.)
bool glm52_default_full(int layer) { return layer < 3 || (layer >= 6 && layer < 78 && (layer - 6) % 4 == 0); }

std::vector<bool> indexer_schedule(const Hparams& hp, int n_layer, int64_t n_ctx_train) {
    std::vector<bool> full(static_cast<size_t>(n_layer));
    for (int l = 0; l < n_layer; ++l) full[size_t(l)] = n_ctx_train < kGlm52Context || glm52_default_full(l);
    const GgufFile& f = hp.file();
    const std::string k = hp.key("attention.indexer.types");
    const GgufValue* v = f.find(k);
    if (!v) return full;
    if (v->type != GgufValueType::ARRAY) {
        const int64_t all = hp.count_or("attention.indexer.types", 0, 0, 1);
        std::fill(full.begin(), full.end(), all != 0);
    } else {
        if (!gguf_value_type_is_integer(v->elem_type) && v->elem_type != GgufValueType::BOOL)
            throw Error(f.path() + ": metadata key '" + k + "' is an array of " + gguf_value_type_name(v->elem_type) +
                        ", not of integers.");
        if (static_cast<int64_t>(v->ints.size()) < n_layer)
            throw Error(f.path() + ": metadata key '" + k + "' has " + std::to_string(v->ints.size()) +
                        " values for " + std::to_string(n_layer) + " trunk blocks.");
        for (int l = 0; l < n_layer; ++l) full[size_t(l)] = v->ints[size_t(l)] != 0;
    }
    if (n_layer > 0 && !full[0])
        throw Error(f.path() + ": metadata key '" + k +
                    "' makes block 0 share the indexer of an earlier block, and there is none.");
    return full;
}

}  // namespace

GlmDsaHparams read_glm_dsa_hparams(const GgufFile& f) {
    Hparams hp(f, kArch);
    auto key = [&](const char* k) { return hp.quoted(k); };
    auto problem = [&](const std::string& what) { return Error(f.path() + ": " + what); };
    GlmDsaHparams h;
    h.n_embd = hp.count("embedding_length");
    h.n_ctx_train = hp.count_or("context_length", 0, 0, kMaxHparamContext);
    h.n_layer_all = static_cast<int>(hp.count("block_count"));
    const int n_nextn = static_cast<int>(hp.count_or("nextn_predict_layers", 0, 0, h.n_layer_all - 1));
    h.n_layer = h.n_layer_all - n_nextn;
    h.n_head = static_cast<int>(hp.count("attention.head_count"));
    // MLA: the file must give the un-absorbed head sizes (llama.cpp refuses
    // glm-dsa files without them too).
    if (!f.find(hp.key("attention.key_length_mla")) || !f.find(hp.key("attention.value_length_mla")))
        throw problem("glm-dsa needs multi-head latent attention, but metadata keys " + key("attention.key_length_mla") +
                      " and " + key("attention.value_length_mla") + " are not both present.");
    h.head_dim_k = static_cast<int>(hp.count("attention.key_length_mla"));
    h.head_dim_v = static_cast<int>(hp.count("attention.value_length_mla"));
    h.q_lora_rank = hp.count("attention.q_lora_rank");
    h.kv_lora_rank = hp.count("attention.kv_lora_rank");
    const int64_t key_length = hp.count_or("attention.key_length", h.n_embd / h.n_head);
    h.n_rot = static_cast<int>(hp.count_or("rope.dimension_count", key_length));
    if (h.n_rot % 2 != 0 || h.n_rot >= h.head_dim_k)
        throw problem("metadata key " + key("rope.dimension_count") + " (" + std::to_string(h.n_rot) +
                      ") must be even and below " + key("attention.key_length_mla") + " (" +
                      std::to_string(h.head_dim_k) + ").");

    h.n_dense_lead = static_cast<int>(hp.count_or("leading_dense_block_count", 0, 0, h.n_layer));
    h.n_ff = h.n_dense_lead > 0 ? hp.count("feed_forward_length") : hp.count_or("feed_forward_length", 0, 0);
    h.n_ff_exp = hp.count("expert_feed_forward_length");
    h.n_expert = static_cast<int>(hp.count("expert_count"));
    h.n_expert_used = static_cast<int>(hp.count("expert_used_count"));
    if (h.n_expert_used > h.n_expert)
        throw problem("metadata key " + key("expert_used_count") + " (" + std::to_string(h.n_expert_used) +
                      ") exceeds " + key("expert_count") + " (" + std::to_string(h.n_expert) + ").");
    h.n_expert_shared = static_cast<int>(hp.count("expert_shared_count"));
    h.n_expert_groups = static_cast<int>(hp.count_or("expert_group_count", 0, 0));
    h.n_group_used = static_cast<int>(hp.count_or("expert_group_used_count", 0, 0));
    if (h.n_expert_groups > 1 &&
        (h.n_expert % h.n_expert_groups != 0 || h.n_group_used < 1 || h.n_group_used > h.n_expert_groups ||
         int64_t(h.n_group_used) * (h.n_expert / h.n_expert_groups) < h.n_expert_used))
        throw problem("metadata keys " + key("expert_group_count") + " (" + std::to_string(h.n_expert_groups) + ") and " +
                      key("expert_group_used_count") + " (" + std::to_string(h.n_group_used) + ") do not fit " +
                      std::to_string(h.n_expert_used) + " of " + std::to_string(h.n_expert) + " experts.");
    h.expert_weights_norm = hp.bool_or("expert_weights_norm", false);
    h.expert_weights_scale = static_cast<float>(hp.number_or("expert_weights_scale", 0.0, NumberRange::NonNegative));
    const int64_t gating = hp.count_or("expert_gating_func", kGatingSigmoid, 0, 16);
    if (gating != 0 && gating != kGatingSigmoid)
        throw problem("metadata key " + key("expert_gating_func") + " is " + std::to_string(gating) +
                      (gating == kGatingSoftmax ? " (softmax)" : "") + "; ds4 runs glm-dsa with sigmoid gating (2).");

    h.indexer_n_head = static_cast<int>(hp.count("attention.indexer.head_count"));
    h.indexer_head_dim = static_cast<int>(hp.count("attention.indexer.key_length"));
    h.indexer_top_k = hp.count("attention.indexer.top_k", 1, kMaxHparamContext);
    if (h.n_rot > h.indexer_head_dim)
        throw problem("metadata key " + key("rope.dimension_count") + " (" + std::to_string(h.n_rot) +
                      ") exceeds " + key("attention.indexer.key_length") + " (" +
                      std::to_string(h.indexer_head_dim) + "): the indexer rotates that many of its dimensions.");
    h.indexer_full = indexer_schedule(hp, h.n_layer, h.n_ctx_train);

    h.rms_eps = static_cast<float>(hp.number_or("attention.layer_norm_rms_epsilon", 1e-6, NumberRange::NonNegative));
    h.rope = rope_params_from_metadata(hp, h.n_rot, /*neox=*/false);
    // llama.cpp's glm-dsa graph: undo the YaRN attention-factor correction
    // to get the original factor, then fold YaRN's mscale (with the log
    // multiplier) into the score scale, squared (it scales q and k alike).
    const double log_mul = hp.number_or("rope.scaling.yarn_log_multiplier", 0.0, NumberRange::Any);
    const float inv_scale = std::log(1.0f / h.rope.freq_scale);
    const float attn_factor_org = h.rope.attn_factor * (1.0f + 0.1f * inv_scale);
    const float mscale = attn_factor_org * (1.0f + 0.1f * static_cast<float>(log_mul) * inv_scale);
    h.kq_scale = mscale * mscale / std::sqrt(static_cast<float>(h.head_dim_k));
    return h;
}

}  // namespace ds4

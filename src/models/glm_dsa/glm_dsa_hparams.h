// GLM-5.x (`glm-dsa`) hyper-parameters, read from GGUF metadata only: the
// keys llama.cpp's glm-dsa loader reads, with its defaults.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf_file.h"

namespace ds4 {

struct GlmDsaHparams {
    int64_t n_vocab = 0, n_embd = 0, n_ctx_train = 0;
    int n_layer = 0;          // trunk blocks (block_count less the MTP blocks)
    int n_layer_all = 0;      // block_count: trunk + nextn_predict_layers MTP blocks
    int n_head = 0;
    int64_t q_lora_rank = 0, kv_lora_rank = 0;
    int head_dim_k = 0;       // key_length_mla: a head's query/key before absorption (nope + rope)
    int head_dim_v = 0;       // value_length_mla: a head's value after wv_b
    int n_rot = 0;            // the decoupled RoPE part of each head (its tail) and of the latent row
    int n_nope() const { return head_dim_k - n_rot; }
    int n_dense_lead = 0;     // leading blocks with a dense SwiGLU FFN
    int64_t n_ff = 0;         // the dense blocks' FFN width
    int64_t n_ff_exp = 0;     // one expert's width (the shared experts together: n_ff_exp * n_expert_shared)
    int n_expert = 0, n_expert_used = 0, n_expert_shared = 0;
    int n_expert_groups = 0, n_group_used = 0;  // group-limited routing when n_expert_groups > 1
    bool expert_weights_norm = false;
    float expert_weights_scale = 0.0f;          // 0 or 1: unscaled
    int indexer_n_head = 0, indexer_head_dim = 0;
    int64_t indexer_top_k = 0;
    // Per trunk block: whether it runs its own lightning indexer ("full")
    // or reuses the top-k of the last full block before it ("shared").
    std::vector<bool> indexer_full;
    float rms_eps = 1e-6f;
    // The indexer keys' layer norm: llama.cpp's glm-dsa loader reads no
    // layer-norm epsilon, so its ggml_norm runs with 0; so does ds4.
    float indexer_norm_eps = 0.0f;
    RopeParams rope;
    float kq_scale = 1.0f;    // attention score scale, YaRN mscale included
};

// Throws ds4::Error naming the file and key for missing or unsupported values.
GlmDsaHparams read_glm_dsa_hparams(const GgufFile& file);

}  // namespace ds4

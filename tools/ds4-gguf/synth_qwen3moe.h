// `ds4-gguf synth --arch qwen3moe`: a random-weight Qwen3-MoE GGUF with the
// metadata keys and tensor names/shapes llama.cpp's qwen3moe loader
// requires (src/models/qwen3moe.cpp: load_arch_hparams, load_arch_tensors),
// and the real Qwen3 tokenizer and chat template embedded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"

namespace ds4 {

struct Qwen3MoeShape {
    std::string preset;
    uint32_t n_layer = 0;
    uint32_t n_embd = 0;
    uint32_t n_head = 0;
    uint32_t n_head_kv = 0;
    uint32_t head_dim = 0;
    uint32_t n_expert = 0;
    uint32_t n_expert_used = 0;
    uint32_t n_ff_exp = 0;     // expert_feed_forward_length
    uint32_t n_ff = 0;         // feed_forward_length (dense width; metadata only for MoE layers)
    uint32_t n_ctx_train = 0;
    int64_t n_vocab = 0;       // 0 = the tokenizer's own size
    float rope_theta = 0;
    float rms_eps = 0;
};

// "tiny" (a few MB of layers plus the 151k-token embeddings) or
// "qwen3-30b-a3b" (the real model's shapes). Throws ds4::UsageError for
// another name.
Qwen3MoeShape qwen3moe_preset(const std::string& name);
std::vector<std::string> qwen3moe_preset_names();

struct SynthOptions {
    std::string preset = "tiny";
    std::string out;
    uint64_t seed = 0;
    GgmlType type = GgmlType::F32;       // attention, expert and output matrices
    GgmlType embd_type = GgmlType::F32;  // token_embd
    std::string tokenizer_dir;           // holds tokenizer.json and tokenizer_config.json
    bool progress = false;               // per-tensor lines on stderr
};

struct SynthResult {
    size_t tensors = 0;
    uint64_t file_bytes = 0;
    int64_t n_vocab = 0;
};

// Writes the model to opts.out. Throws ds4::Error (file, tokenizer problems).
SynthResult synth_qwen3moe(const SynthOptions& opts);

}  // namespace ds4

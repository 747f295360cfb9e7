// A random-weight Qwen3-MoE GGUF (`ds4-gguf synth --arch qwen3moe`,
// `ds4-bench --synthetic qwen3-...`) with the metadata keys and tensor
// names/shapes llama.cpp's qwen3moe loader requires (src/models/qwen3moe.cpp:
// load_arch_hparams, load_arch_tensors), and either the real Qwen3 tokenizer
// and chat template embedded or, for benchmarks, no tokenizer at all.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/layer_range.h"
#include "gguf/ggml_type.h"
#include "synth/synth_result.h"

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
    int64_t n_vocab = 0;       // 0 = the tokenizer's own size (else it is padded to this)
    float rope_theta = 0;
    float rms_eps = 0;
};

// "micro" (2 layers of width 8, 16 tokens, a few KB; tokenizer-less only),
// "tiny" (a few MB of layers plus the 151k-token embeddings), "tiny-kquant"
// (tiny, but every row whole 256-element K-quant blocks and 4 experts: the
// Q4_K_M mix without llama.cpp's fallbacks or its 8-expert rules),
// "qwen3-30b-a3b" or "qwen3-235b-a22b" (the real models' shapes). Throws
// ds4::UsageError for another name.
Qwen3MoeShape qwen3moe_preset(const std::string& name);
std::vector<std::string> qwen3moe_preset_names();

// The preset's first n_layer blocks as a model of their own (block_count
// n_layer, every width the preset's). Throws ds4::UsageError unless
// 1 <= n_layer <= the preset's block count.
Qwen3MoeShape truncate_qwen3moe_shape(const Qwen3MoeShape& shape, int n_layer);

// How the matrices are typed: all `type` (and token_embd `embd_type`), or
// the per-tensor mix llama-quantize makes for Q4_K_M (synth/q4_k_m_mix.h).
enum class Qwen3MoeMix { Uniform, Q4_K_M };

struct SynthOptions {
    std::string preset = "tiny";
    std::string out;                     // a path; /proc/self/fd/N works too
    uint64_t seed = 0;
    Qwen3MoeMix mix = Qwen3MoeMix::Uniform;
    GgmlType type = GgmlType::F32;       // attention, expert and output matrices
    GgmlType embd_type = GgmlType::F32;  // token_embd
    // false: no tokenizer, only tokenizer.ggml.model "none" and
    // qwen3moe.vocab_size (what llama.cpp needs to load a vocabulary-less
    // model); the embedding has the real model's 151,936 rows, or n_vocab.
    bool tokenizer = true;
    int64_t n_vocab = 0;                 // tokenizer-less only: rows of the embedding (0: the model's)
    std::string tokenizer_dir;           // holds tokenizer.json and tokenizer_config.json
    // Not 0: a truncated model with only the first n_layer blocks
    // (truncate_qwen3moe_shape); 0: the preset's block count.
    int n_layer = 0;
    // The blocks that get tensors (default: all);
    // block_count stays the model's (the preset's, or n_layer), so a slice
    // of a huge model is cheap.
    LayerRange layers;
    // Called with the file size before anything is written; may throw to refuse.
    std::function<void(uint64_t file_bytes)> on_size;
    bool progress = false;               // per-tensor lines on stderr
};


// The Qwen3 models' vocabulary size (embedding rows), used without a tokenizer.
constexpr int64_t kQwen3VocabSize = 151936;

// Writes the model to opts.out. Throws ds4::Error (file, tokenizer problems).
SynthResult synth_qwen3moe(const SynthOptions& opts);

}  // namespace ds4

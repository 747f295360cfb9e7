// DeepSeek V4 (`deepseek4`) hyper-parameters, read from GGUF metadata only:
// the same keys llama.cpp's deepseek4 loader reads, per-layer arrays where
// the format has them (compress ratios, SwiGLU clamps).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf_file.h"

namespace ds4 {

struct Dsv4Hparams {
    std::string path;         // the file, for messages about its contents at run time
    int64_t n_vocab = 0, n_embd = 0, n_ctx_train = 0;
    int n_layer = 0;          // trunk layers (MTP layers excluded)
    int n_head = 0;
    int head_dim = 0;         // key = value length (512 on Flash)
    int n_rot = 0;            // rotated tail of each head
    int64_t q_lora_rank = 0;
    int64_t n_swa = 0;        // sliding window (positions, including the query's own)
    int n_expert = 0, n_expert_used = 0, n_expert_shared = 0;
    float expert_weights_scale = 1.0f;
    bool expert_weights_norm = true;
    std::vector<float> swiglu_clamp_exp, swiglu_clamp_shexp;  // per layer; <= 1e-6 means none
    int indexer_n_head = 0, indexer_head_dim = 0;
    int64_t indexer_top_k = 0;
    int o_groups = 0;
    int64_t o_lora_rank = 0;
    int n_hc = 0;
    int sinkhorn_iters = 0;
    float hc_eps = 1e-6f;
    int n_hash_layers = 0;
    std::vector<int> compress_ratios;  // per layer: 0 (window only), 4 (CSA) or 128 (HCA)
    float rms_eps = 1e-6f;
    RopeParams rope_window;    // layers without compression: plain RoPE
    RopeParams rope_compress;  // compressed layers, compressors and indexer: compress base + YaRN
};

constexpr int kDsv4CsaRatio = 4;
constexpr int kDsv4HcaRatio = 128;

// Throws ds4::Error naming the file and key for missing or unsupported values.
Dsv4Hparams read_dsv4_hparams(const GgufFile& file);

}  // namespace ds4

// DeepSeek V4 weights bound to the model map: the tensor names and shapes
// of published deepseek4 GGUF files (llama.cpp's names). Optional `.scale` /
// `.input_scale` companions and `exp_probs_b_vl` are not bound: llama.cpp's
// deepseek4 graph does not apply them to token input.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "experts/expert_source.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/deepseek4/dsv4_hparams.h"

namespace ds4 {

// Weights of one hyper-connection site (before attention or before the FFN,
// or the output head).
struct Dsv4HcWeights {
    WeightRef fn, base, scale;
};

// A compressor: kv / gate projections, the absolute position bias (one row
// per position inside a block) and the RMS norm of pooled rows.
struct Dsv4CompressorWeights {
    WeightRef wkv, wgate, ape, norm;
};

struct Dsv4LayerWeights {
    Dsv4HcWeights hc_attn, hc_ffn;
    WeightRef attn_norm, attn_sinks;
    WeightRef wq_a, q_a_norm, wq_b;
    WeightRef wkv, kv_norm;
    WeightRef wo_a;  // [heads_per_group * head_dim, o_lora_rank, o_groups]
    WeightRef wo_b;
    Dsv4CompressorWeights compressor;          // ratio 4 and 128
    Dsv4CompressorWeights indexer_compressor;  // ratio 4
    WeightRef indexer_q_b, indexer_proj;       // ratio 4

    WeightRef ffn_norm, gate_inp, exp_probs_b;
    // Hash layers: i32 [n_vocab x n_expert_used] expert ids (ne[0] =
    // n_expert_used), every id checked when the model loads.
    WeightRef tid2eid;
    RoutedExperts experts;
    WeightRef gate_shexp, up_shexp, down_shexp;
};

struct Dsv4Weights {
    WeightRef tok_embd, output_norm, output;
    Dsv4HcWeights hc_head;
    std::vector<Dsv4LayerWeights> layers;
};

// Binds every trunk tensor; throws ds4::Error naming the file and tensor.
// Binds the non-layer tensors (the head's only with has_head) and those of blocks [first, last) (layers[0] is block `first`);
// the routed experts to their bytes only with resident_experts (LoadOptions).
Dsv4Weights bind_dsv4_weights(const GgufFile& file, ModelMap& map, Dsv4Hparams& hp, int first, int last,
                              bool has_head, bool resident_experts);

}  // namespace ds4

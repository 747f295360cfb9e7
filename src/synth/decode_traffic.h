// Bytes of weights one decode step reads: the roofline denominator of a
// benchmark (tokens/s x these bytes = the weight bandwidth achieved).
//
// Counted from the GGUF tensor table for blocks [layer_begin, layer_end):
// every tensor of those blocks except the routed experts, n_used/n_expert of
// each routed-expert tensor (blk.N.ffn_{gate,up,down}_exps.weight: the
// expected share under uniform routing, which holds for hash-routed
// DeepSeek V4 layers too), the output head (every tensor outside the blocks
// but the embedding) and one row of the embedding (and of a hash layer's
// token-to-expert table, which is indexed like one).
#pragma once

#include <cstdint>

#include "gguf/gguf_file.h"

namespace ds4 {

struct DecodeWeightBytes {
    double total = 0;           // bytes per decoded token (routed part is an expectation)
    double routed_experts = 0;  // the n_used/n_expert share of the routed-expert tensors
    uint64_t layers_other = 0;  // attention, norms, router, shared experts, ... of the run blocks
    uint64_t output_head = 0;
    uint64_t embedding_row = 0;
};

// Throws ds4::Error when the file lacks general.architecture. A file without
// expert counts is read as dense (no routed-expert tensors expected).
DecodeWeightBytes decode_weight_bytes(const GgufFile& file, int layer_begin, int layer_end);

}  // namespace ds4

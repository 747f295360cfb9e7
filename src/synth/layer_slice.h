// Which blocks a synthetic model file holds, and the keys that say how to
// make the same file again.
#pragma once

#include <cstdint>
#include <string>

namespace ds4 {

class GgufWriter;

// The end of the block slice [layer_begin, layer_end) of a model of n_layer
// blocks (layer_end < 0: through the last). Throws ds4::UsageError naming
// `model` (e.g. "qwen3moe tiny") when the slice is empty or outside.
int synth_layer_end(int layer_begin, int layer_end, int n_layer, const std::string& model);

// ds4.synth.preset and ds4.synth.seed, ds4.synth.n_layer for a truncated
// model (truncated_to != 0), ds4.synth.layers "B:E" for a slice of the
// n_layer blocks. No loader reads them.
void record_synth_recipe(GgufWriter& w, const std::string& preset, uint64_t seed, int truncated_to, int n_layer,
                         int layer_begin, int layer_end);

}  // namespace ds4

// Which blocks a synthetic model file holds, and the keys that say how to
// make the same file again.
#pragma once

#include <cstdint>
#include <string>

#include "common/layer_range.h"

namespace ds4 {

class GgufWriter;

// The slice's end for a model of n_layer blocks. Throws ds4::UsageError
// naming `model` (e.g. "qwen3moe tiny") when the slice is empty or outside.
int synth_layer_end(const LayerRange& layers, int n_layer, const std::string& model);

// ds4.synth.preset and ds4.synth.seed, ds4.synth.n_layer for a truncated
// model (truncated_to != 0), ds4.synth.layers "B:E" for a slice of the
// n_layer blocks. No loader reads them.
void record_synth_recipe(GgufWriter& w, const std::string& preset, uint64_t seed, int truncated_to, int n_layer,
                         const LayerRange& layers);

}  // namespace ds4

#include "synth/layer_slice.h"

#include "common/error.h"
#include "gguf/gguf_writer.h"

namespace ds4 {

int synth_layer_end(int layer_begin, int layer_end, int n_layer, const std::string& model) {
    const int end = layer_end < 0 ? n_layer : layer_end;
    if (layer_begin < 0 || layer_begin >= end || end > n_layer)
        throw UsageError("layers " + std::to_string(layer_begin) + ":" + std::to_string(end) + " are outside the " +
                         std::to_string(n_layer) + " layers of " + model);
    return end;
}

void record_synth_recipe(GgufWriter& w, const std::string& preset, uint64_t seed, int truncated_to, int n_layer,
                         int layer_begin, int layer_end) {
    w.set("ds4.synth.preset", GgufValue::string(preset));
    w.set("ds4.synth.seed", GgufValue::u64(seed));
    if (truncated_to != 0) w.set("ds4.synth.n_layer", GgufValue::u32(static_cast<uint32_t>(n_layer)));
    if (layer_begin != 0 || layer_end != n_layer)
        w.set("ds4.synth.layers", GgufValue::string(std::to_string(layer_begin) + ":" + std::to_string(layer_end)));
}

}  // namespace ds4

#include "synth/layer_slice.h"

#include "common/error.h"
#include "gguf/gguf_writer.h"

namespace ds4 {

int synth_layer_end(const LayerRange& layers, int n_layer, const std::string& model) {
    if (const std::string problem = layer_range_problem(layers, n_layer); !problem.empty())
        throw UsageError("layers " + problem + " of " + model);
    return layers.end_of(n_layer);
}

void record_synth_recipe(GgufWriter& w, const std::string& preset, uint64_t seed, int truncated_to, int n_layer,
                         const LayerRange& layers) {
    const int layer_begin = layers.begin, layer_end = layers.end_of(n_layer);
    w.set("ds4.synth.preset", GgufValue::string(preset));
    w.set("ds4.synth.seed", GgufValue::u64(seed));
    if (truncated_to != 0) w.set("ds4.synth.n_layer", GgufValue::u32(static_cast<uint32_t>(n_layer)));
    if (layer_begin != 0 || layer_end != n_layer)
        w.set("ds4.synth.layers", GgufValue::string(std::to_string(layer_begin) + ":" + std::to_string(layer_end)));
}

}  // namespace ds4

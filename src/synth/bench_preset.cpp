#include "synth/bench_preset.h"

#include "common/error.h"

namespace ds4 {

namespace {

// Every family's presets, in table order (the order --help and errors list them).
std::vector<SyntheticPreset> all_presets() {
    std::vector<SyntheticPreset> all;
    for (const SynthFamily* f : synth_families())
        for (SyntheticPreset& p : f->bench_presets()) all.push_back(std::move(p));
    return all;
}

}  // namespace

std::vector<std::string> synthetic_preset_names() {
    std::vector<std::string> names;
    for (const auto& p : all_presets()) names.push_back(p.name);
    return names;
}

SyntheticPreset synthetic_preset(const std::string& name) {
    std::string known;
    for (auto& p : all_presets()) {
        if (p.name == name) return p;
        known += (known.empty() ? "" : ", ") + p.name;
    }
    throw UsageError("--synthetic must be one of " + known + "; got '" + name + "'");
}

SyntheticPreset truncate_synthetic_preset(SyntheticPreset preset, int n_layer) {
    preset.n_layer = synth_family(preset.arch).truncated_block_count(preset.shape, n_layer);
    preset.truncate_to = n_layer;
    return preset;
}

SynthResult write_synthetic_model(const SyntheticPreset& preset, uint64_t seed, const LayerRange& range,
                                  const std::string& path, const std::function<void(uint64_t)>& on_size) {
    SynthRequest r;
    r.preset = preset.shape;
    r.out = path;
    r.seed = seed;
    r.type = preset.type;
    r.quant = preset.quant;
    r.n_layer = preset.truncate_to;
    r.n_layer_given = preset.truncate_to != 0;
    r.tokenizer = false;
    r.layers = range;
    r.on_size = on_size;
    return synth_family(preset.arch).synth(r);
}

}  // namespace ds4

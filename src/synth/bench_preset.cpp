#include "synth/bench_preset.h"

#include "common/error.h"

namespace ds4 {

namespace {

SyntheticPreset qwen(const std::string& name, const std::string& shape, Qwen3MoeMix mix, GgmlType type) {
    SyntheticPreset p;
    p.name = name;
    p.arch = "qwen3moe";
    p.shape = shape;
    p.n_layer = static_cast<int>(qwen3moe_preset(shape).n_layer);
    p.mix = mix;
    p.type = type;
    return p;
}

SyntheticPreset deepseek(const std::string& name, const std::string& shape, Deepseek4Quant quant) {
    SyntheticPreset p;
    p.name = name;
    p.arch = "deepseek4";
    p.shape = shape;
    p.n_layer = static_cast<int>(deepseek4_preset(shape).n_layer);
    p.quant = quant;
    return p;
}

// Every preset, in the order --help and errors list them.
std::vector<SyntheticPreset> all_presets() {
    using M = Qwen3MoeMix;
    using Q = Deepseek4Quant;
    return {
        qwen("qwen3-30b-a3b-q4_k_m", "qwen3-30b-a3b", M::Q4_K_M, GgmlType::Q4_K),
        qwen("qwen3-30b-a3b-q8_0", "qwen3-30b-a3b", M::Uniform, GgmlType::Q8_0),
        qwen("qwen3-30b-a3b-f16", "qwen3-30b-a3b", M::Uniform, GgmlType::F16),
        qwen("qwen3-235b-a22b-q4_k_m", "qwen3-235b-a22b", M::Q4_K_M, GgmlType::Q4_K),
        qwen("qwen3-235b-a22b-q8_0", "qwen3-235b-a22b", M::Uniform, GgmlType::Q8_0),
        deepseek("deepseek4-flash-q2", "flash", Q::Q2),
        deepseek("deepseek4-flash-q4", "flash", Q::Q4),
        deepseek("deepseek4-pro-q2", "pro", Q::Q2),
        deepseek("deepseek4-pro-q4", "pro", Q::Q4),
        qwen("qwen3moe-tiny-f32", "tiny", M::Uniform, GgmlType::F32),
        qwen("qwen3moe-tiny-q4_k_m", "tiny-kquant", M::Q4_K_M, GgmlType::Q4_K),
        deepseek("deepseek4-tiny-f32", "tiny", Q::F32),
    };
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

SynthResult write_synthetic_model(const SyntheticPreset& preset, uint64_t seed, const LayerRange& range,
                                  const std::string& path, const std::function<void(uint64_t)>& on_size) {
    if (preset.arch == "qwen3moe") {
        SynthOptions o;
        o.preset = preset.shape;
        o.out = path;
        o.seed = seed;
        o.mix = preset.mix;
        o.type = preset.type;
        o.embd_type = preset.type;
        o.tokenizer = false;
        o.layers = range;
        o.on_size = on_size;
        return synth_qwen3moe(o);
    }
    Deepseek4SynthOptions o;
    o.preset = preset.shape;
    o.out = path;
    o.seed = seed;
    o.quant = preset.quant;
    o.tokenizer = false;
    o.layers = range;
    o.on_size = on_size;
    return synth_deepseek4(o);
}

}  // namespace ds4

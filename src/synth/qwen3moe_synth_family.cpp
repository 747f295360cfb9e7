// Qwen3-MoE's entry in the synth family table: `--type`/`--embd-type`
// checked and turned into SynthOptions, and its ds4-bench presets.
#include <cstdio>

#include "cli/cli_values.h"
#include "common/error.h"
#include "synth/qwen3moe.h"
#include "synth/synth_family.h"

namespace ds4 {
namespace {

GgmlType parse_weight_type(const std::string& flag, const std::string& text) {
    if (text == "f32") return GgmlType::F32;
    if (text == "f16") return GgmlType::F16;
    if (text == "bf16") return GgmlType::BF16;
    if (text == "q8_0") return GgmlType::Q8_0;
    if (text == "q4_k") return GgmlType::Q4_K;
    if (text == "q6_k") return GgmlType::Q6_K;
    throw UsageError(flag + " must be f32, f16, bf16, q8_0, q4_k, q6_k or q4_k_m, got " + quote_value(text));
}

SynthResult synth(const SynthRequest& r) {
    if (!r.quant.empty() || !r.template_file.empty())
        throw UsageError("--quant and --template-file are for deepseek4; qwen3moe takes --type");
    const std::string type = r.type.empty() ? "f32" : r.type;
    SynthOptions o;
    const Qwen3MoeShape shape = qwen3moe_preset(r.preset);  // validates the name before any work
    o.preset = r.preset;
    o.n_layer = r.n_layer_given ? r.n_layer : 0;
    if (r.n_layer_given) truncate_qwen3moe_shape(shape, o.n_layer);  // validates N (0 too) first
    o.out = r.out;
    if (o.out.empty()) throw UsageError("--out needs a file name");
    if (type == "q4_k_m") {
        if (!r.embd_type.empty())
            throw UsageError("--embd-type cannot be combined with --type q4_k_m (the mix decides it)");
        o.mix = Qwen3MoeMix::Q4_K_M;
    } else {
        o.type = parse_weight_type("--type", type);
        o.embd_type = r.embd_type.empty() ? o.type : parse_weight_type("--embd-type", r.embd_type);
    }
    if (!r.tokenizer && !r.tokenizer_dir.empty()) throw UsageError("--no-tokenizer excludes --tokenizer-dir");
    o.tokenizer = r.tokenizer;
    o.seed = r.seed;
    o.tokenizer_dir = r.tokenizer_dir;
    o.progress = r.progress;
    o.layers = r.layers;
    o.on_size = r.on_size;
    return synth_qwen3moe(o);
}

std::string describe(const SynthRequest& r) { return "qwen3moe " + r.preset; }

SyntheticPreset preset(const std::string& name, const std::string& shape, const std::string& type) {
    return SyntheticPreset{name, "qwen3moe", shape, static_cast<int>(qwen3moe_preset(shape).n_layer), type, ""};
}

std::vector<SyntheticPreset> bench_presets() {
    return {
        preset("qwen3-30b-a3b-q4_k_m", "qwen3-30b-a3b", "q4_k_m"),
        preset("qwen3-30b-a3b-q8_0", "qwen3-30b-a3b", "q8_0"),
        preset("qwen3-30b-a3b-f16", "qwen3-30b-a3b", "f16"),
        preset("qwen3-235b-a22b-q4_k_m", "qwen3-235b-a22b", "q4_k_m"),
        preset("qwen3-235b-a22b-q8_0", "qwen3-235b-a22b", "q8_0"),
        preset("qwen3moe-tiny-f32", "tiny", "f32"),
        preset("qwen3moe-tiny-q4_k_m", "tiny-kquant", "q4_k_m"),
    };
}

int truncated_block_count(const std::string& shape, int n_layer) {
    return static_cast<int>(truncate_qwen3moe_shape(qwen3moe_preset(shape), n_layer).n_layer);
}

}  // namespace

const SynthFamily& qwen3moe_synth_family() {
    static const SynthFamily family{"qwen3moe", synth, describe, bench_presets, truncated_block_count};
    return family;
}

}  // namespace ds4

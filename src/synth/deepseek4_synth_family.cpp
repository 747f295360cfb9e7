// DeepSeek V4's entry in the synth family table: `--quant` and
// `--template-file` checked and turned into Deepseek4SynthOptions, and its
// ds4-bench presets.
#include <algorithm>
#include <cstdio>

#include "common/error.h"
#include "common/log.h"
#include "synth/deepseek4.h"
#include "synth/synth_family.h"

namespace ds4 {
namespace {

SynthResult synth(const SynthRequest& r) {
    if (!r.type.empty() || !r.embd_type.empty())
        throw UsageError("--type and --embd-type are for qwen3moe; deepseek4 takes --quant q2|q4|f32");
    Deepseek4SynthOptions o;
    const Deepseek4Shape shape = deepseek4_preset(r.preset);  // validates the name before any work
    o.preset = r.preset;
    o.n_layer = r.n_layer_given ? r.n_layer : 0;
    if (r.n_layer_given) {
        const Deepseek4Shape t = truncate_deepseek4_shape(shape, o.n_layer);  // validates N (0 too) first
        auto keeps = [&](int32_t ratio) {
            return std::find(t.compress_ratios.begin(), t.compress_ratios.begin() + o.n_layer, ratio) !=
                   t.compress_ratios.begin() + o.n_layer;
        };
        // Not an error (ds4 runs the file), but llama.cpp divides by zero
        // building the cache of a compressed kind no layer has.
        if (!keeps(4) || !keeps(128)) {
            char line[200];
            std::snprintf(line, sizeof line,
                          "note: the first %d layers of deepseek4 %s have no ratio-%s layer; "
                          "llama.cpp cannot run the file (ds4 can)",
                          o.n_layer, r.preset.c_str(), keeps(4) ? "128" : "4");
            log_info(line);
        }
    }
    o.out = r.out;
    if (o.out.empty()) throw UsageError("--out needs a file name");
    o.quant = r.quant.empty() ? Deepseek4Quant::F32 : parse_deepseek4_quant("--quant", r.quant);
    if (!r.tokenizer && (!r.tokenizer_dir.empty() || !r.template_file.empty()))
        throw UsageError("--no-tokenizer excludes --tokenizer-dir and --template-file");
    o.seed = r.seed;
    o.tokenizer = r.tokenizer;
    o.tokenizer_dir = r.tokenizer_dir;
    o.template_file = r.template_file;
    o.progress = r.progress;
    o.layers = r.layers;
    o.on_size = r.on_size;
    return synth_deepseek4(o);
}

std::string describe(const SynthRequest& r) {
    return "deepseek4 " + r.preset + " " + (r.quant.empty() ? "f32" : r.quant);
}

SyntheticPreset preset(const std::string& name, const std::string& shape, const std::string& quant) {
    return SyntheticPreset{name, "deepseek4", shape, static_cast<int>(deepseek4_preset(shape).n_layer), "", quant};
}

std::vector<SyntheticPreset> bench_presets() {
    return {
        preset("deepseek4-flash-q2", "flash", "q2"),
        preset("deepseek4-flash-q4", "flash", "q4"),
        preset("deepseek4-pro-q2", "pro", "q2"),
        preset("deepseek4-pro-q4", "pro", "q4"),
        preset("deepseek4-tiny-f32", "tiny", "f32"),
    };
}

int truncated_block_count(const std::string& shape, int n_layer) {
    return static_cast<int>(truncate_deepseek4_shape(deepseek4_preset(shape), n_layer).n_layer);
}

}  // namespace

const SynthFamily& deepseek4_synth_family() {
    static const SynthFamily family{"deepseek4", synth, describe, bench_presets, truncated_block_count};
    return family;
}

}  // namespace ds4

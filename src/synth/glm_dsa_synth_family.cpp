// GLM-5's entry in the synth family table: `--type` or `--quant q2`, the
// tokenizer flags and --template-file checked and turned into
// GlmDsaSynthOptions, and its ds4-bench presets (glm5-q2: GLM-5's shape in
// llama-quantize's Q2_K mix, the published files' starting point).
#include "cli/cli_values.h"
#include "common/error.h"
#include "synth/glm_dsa.h"
#include "synth/synth_family.h"

namespace ds4 {
namespace {

GgmlType parse_type(const std::string& text) {
    if (text.empty() || text == "f32") return GgmlType::F32;
    if (text == "f16") return GgmlType::F16;
    if (text == "bf16") return GgmlType::BF16;
    if (text == "q8_0") return GgmlType::Q8_0;
    if (text == "q4_k") return GgmlType::Q4_K;
    if (text == "q2_k") return GgmlType::Q2_K;
    throw UsageError("--type must be f32, f16, bf16, q8_0, q4_k or q2_k for glm-dsa, got " + quote_value(text));
}

SynthResult synth(const SynthRequest& r) {
    if (!r.embd_type.empty()) throw UsageError("--embd-type is for qwen3moe; glm-dsa takes --type or --quant q2");
    if (!r.quant.empty() && !r.type.empty())
        throw UsageError("--quant and --type exclude each other: --quant q2 is llama-quantize's Q2_K mix, "
                         "--type one type for every matrix");
    if (!r.quant.empty() && r.quant != "q2")
        throw UsageError("--quant must be q2 for glm-dsa (llama-quantize's Q2_K mix), got " + quote_value(r.quant));
    if (!r.tokenizer && (!r.tokenizer_dir.empty() || !r.template_file.empty()))
        throw UsageError("--no-tokenizer leaves out the tokenizer and chat template; --tokenizer-dir and "
                         "--template-file do not apply");
    GlmDsaSynthOptions o;
    const GlmDsaShape shape = glm_dsa_preset(r.preset);  // validates the name before any work
    o.preset = r.preset;
    o.n_layer = r.n_layer_given ? r.n_layer : 0;
    if (r.n_layer_given) truncate_glm_dsa_shape(shape, o.n_layer);  // validates N (0 too) first
    o.type = parse_type(r.type);
    if (r.quant == "q2") o.mix = GlmDsaMix::q2_k;
    o.out = r.out;
    if (o.out.empty()) throw UsageError("--out needs a file name");
    o.seed = r.seed;
    o.progress = r.progress;
    o.layers = r.layers;
    o.on_size = r.on_size;
    o.tokenizer = r.tokenizer;
    o.tokenizer_dir = r.tokenizer_dir;
    o.template_file = r.template_file;
    return synth_glm_dsa(o);
}

// The stand-in is said where it is used: its text ids are not GLM's.
std::string describe(const SynthRequest& r) {
    std::string d = "glm-dsa " + r.preset + (r.quant.empty() ? "" : " " + r.quant);
    if (r.tokenizer && r.tokenizer_dir.empty())
        d += " (stand-in tokenizer: Qwen3's BPE pieces with GLM's special tokens; --tokenizer-dir for GLM's own)";
    return d;
}

std::vector<SyntheticPreset> bench_presets() {
    auto preset = [](const std::string& name, const std::string& shape, const std::string& type,
                     const std::string& quant) {
        const GlmDsaShape s = glm_dsa_preset(shape);
        return SyntheticPreset{name, "glm-dsa", shape, static_cast<int>(s.n_layer + s.n_nextn), type, quant};
    };
    return {preset("glm5-q2", "glm5", "", "q2"), preset("glm-dsa-tiny-f32", "tiny", "f32", "")};
}

int truncated_block_count(const std::string& shape, int n_layer) {
    const GlmDsaShape t = truncate_glm_dsa_shape(glm_dsa_preset(shape), n_layer);
    return static_cast<int>(t.n_layer + t.n_nextn);
}

}  // namespace

const SynthFamily& glm_dsa_synth_family() {
    static const SynthFamily family{"glm-dsa", synth, describe, bench_presets, truncated_block_count};
    return family;
}

}  // namespace ds4

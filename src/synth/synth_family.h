// The synth family table: what `ds4-gguf synth --arch A` and `ds4-bench
// --synthetic` need from each family's random-model generator. A family adds
// one entry (its *_synth_family.cpp): the request checked and written, a
// phrase for the summary line, its benchmark presets. The tools read only
// the table.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/layer_range.h"
#include "synth/synth_result.h"

namespace ds4 {

// A synth request as the command line gives it: family-specific values as
// typed ("" when not given), checked by the family.
struct SynthRequest {
    std::string preset;      // the family's shape name ("tiny", "flash", "qwen3-30b-a3b", ...)
    std::string out;
    uint64_t seed = 0;
    int n_layer = 0;         // --n-layer
    bool n_layer_given = false;
    LayerRange layers;       // blocks that get tensors (benchmarks build slices)
    std::string type, embd_type;             // qwen3moe: --type, --embd-type; glm-dsa: --type
    std::string quant, template_file;        // deepseek4: --quant, --template-file
    bool tokenizer = true;   // false: --no-tokenizer
    std::string tokenizer_dir;
    bool progress = false;
    // Called with the file size before anything is written; may throw to refuse.
    std::function<void(uint64_t file_bytes)> on_size;
};

// A model ds4-bench --synthetic builds: ARCH-SIZE-QUANT names.
struct SyntheticPreset {
    std::string name;   // e.g. "qwen3-30b-a3b-q4_k_m"
    std::string arch;   // the family
    std::string shape;  // the family's preset: "qwen3-30b-a3b", "flash", "tiny", ...
    int n_layer = 0;    // block_count of the model (of the truncated one with truncate_to)
    // The weight types as the family's synth flags take them (SynthRequest).
    std::string type, quant;
    int truncate_to = 0;  // not 0: the model of `ds4-gguf synth --n-layer truncate_to`
};

struct SynthFamily {
    std::string_view arch;
    // Checks the request (ds4::UsageError naming the flag: one of another
    // family, a bad value, an unknown preset) before anything is written,
    // then writes the model (ds4::Error for file and tokenizer problems).
    SynthResult (*synth)(const SynthRequest& request);
    // "qwen3moe tiny", "deepseek4 flash q2": what was written.
    std::string (*describe)(const SynthRequest& request);
    // The presets ds4-bench --synthetic offers for this family.
    std::vector<SyntheticPreset> (*bench_presets)();
    // block_count of preset `shape` truncated by --n-layer n_layer;
    // ds4::UsageError naming the range for a bad n_layer.
    int (*truncated_block_count)(const std::string& shape, int n_layer);
};

const SynthFamily& qwen3moe_synth_family();
const SynthFamily& deepseek4_synth_family();
const SynthFamily& glm_dsa_synth_family();
std::span<const SynthFamily* const> synth_families();
// The entry for `arch`; ds4::UsageError listing the known ones otherwise.
const SynthFamily& synth_family(std::string_view arch);

}  // namespace ds4

// The models ds4-bench --synthetic builds: ARCH-SIZE-QUANT names for the
// synthetic generators (qwen3moe.h, deepseek4.h), and the --layers slice
// A:B (blocks [A, B), plus the embedding and the output head).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "synth/deepseek4.h"
#include "synth/qwen3moe.h"

namespace ds4 {

struct SyntheticPreset {
    std::string name;   // e.g. "qwen3-30b-a3b-q4_k_m"
    std::string arch;   // "qwen3moe" or "deepseek4"
    std::string shape;  // the family's preset: "qwen3-30b-a3b", "flash", "tiny", ...
    int n_layer = 0;    // block_count of the full model
    // qwen3moe: the matrix types.
    Qwen3MoeMix mix = Qwen3MoeMix::Uniform;
    GgmlType type = GgmlType::F32;
    // deepseek4: the published quant mix.
    Deepseek4Quant quant = Deepseek4Quant::F32;
};

std::vector<std::string> synthetic_preset_names();
// Throws ds4::UsageError listing the valid names for an unknown one.
SyntheticPreset synthetic_preset(const std::string& name);

// A slice of blocks [begin, end); end -1 = through the last.
struct LayerRange {
    int begin = 0;
    int end = -1;
};

// "A:B" with 0 <= A < B (decimal); throws ds4::UsageError naming --layers.
LayerRange parse_layer_range(const std::string& text);
// Throws ds4::UsageError unless 0 <= begin < end <= n_layer, naming the
// model's layer count. Returns the range with end resolved.
LayerRange check_layer_range(const LayerRange& range, int n_layer);

// Writes the preset's model (no tokenizer: the real vocabulary size only)
// with blocks [range.begin, range.end) to `path`. `on_size` is called with
// the file size before anything is written and may throw to refuse it.
SynthResult write_synthetic_model(const SyntheticPreset& preset, uint64_t seed, const LayerRange& range,
                                  const std::string& path,
                                  const std::function<void(uint64_t file_bytes)>& on_size = {});

}  // namespace ds4

// The models ds4-bench --synthetic builds: ARCH-SIZE-QUANT names for the
// synthetic generators (qwen3moe.h, deepseek4.h). A --layers slice is a
// LayerRange (common/layer_range.h), parsed as the ds4 program's, so a
// benchmark slice and a pipeline stage are written the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/layer_range.h"
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

// Writes the preset's model (no tokenizer: the real vocabulary size only)
// with the blocks of `range` to `path`. `on_size` is called with
// the file size before anything is written and may throw to refuse it.
SynthResult write_synthetic_model(const SyntheticPreset& preset, uint64_t seed, const LayerRange& range,
                                  const std::string& path,
                                  const std::function<void(uint64_t file_bytes)>& on_size = {});

}  // namespace ds4

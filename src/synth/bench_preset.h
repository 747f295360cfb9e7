// The models ds4-bench --synthetic builds: every family's presets from the
// synth family table (synth_family.h). A --layers slice is a LayerRange
// (common/layer_range.h), parsed as the ds4 program's, so a benchmark slice
// and a pipeline stage are written the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/layer_range.h"
#include "synth/synth_family.h"

namespace ds4 {

std::vector<std::string> synthetic_preset_names();
// Throws ds4::UsageError listing the valid names for an unknown one.
SyntheticPreset synthetic_preset(const std::string& name);

// The preset's model truncated to its first n_layer blocks (trunk blocks:
// a family's MTP block stays), as `ds4-gguf synth --n-layer` writes it.
// Throws ds4::UsageError naming the range for a bad n_layer.
SyntheticPreset truncate_synthetic_preset(SyntheticPreset preset, int n_layer);

// Writes the preset's model (no tokenizer: the real vocabulary size only)
// with the blocks of `range` to `path`. `on_size` is called with
// the file size before anything is written and may throw to refuse it.
SynthResult write_synthetic_model(const SyntheticPreset& preset, uint64_t seed, const LayerRange& range,
                                  const std::string& path,
                                  const std::function<void(uint64_t file_bytes)>& on_size = {});

}  // namespace ds4

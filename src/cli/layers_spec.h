// The --layers value: which slice of the model's blocks this process runs.
//
//   "A:B"       blocks A through B, BOTH inclusive (DwarfStar 4's convention:
//               "--layers 0:29" on the first machine, "--layers 30:output"
//               on the second). A <= B.
//   "N:output"  blocks N through the last one, plus the output head (final
//               norm + lm_head), i.e. the tail stage of a pipeline.
//
// The embedding belongs to the stage that starts at block 0. How many blocks
// the model has is known only after its file is opened, so bounds against the
// model are checked later (layers_spec_check_against_model).
#pragma once

#include <string>
#include <string_view>

namespace ds4 {

struct LayersSpec {
    int first = 0;              // first block, inclusive
    int last = 0;               // last block, inclusive; unused when through_output
    bool through_output = false;

    bool has_embedding() const { return first == 0; }
    bool has_output() const { return through_output; }
    // Exclusive end of the block range for a model with n_layers blocks
    // (the form the model map's MapSelection takes).
    int end_exclusive(int n_layers) const { return through_output ? n_layers : last + 1; }
    // Canonical spelling, e.g. "0:29" or "30:output".
    std::string to_string() const;
};

// Parses a --layers value; throws ds4::UsageError naming --layers and the
// value on anything malformed ("--layers must be A:B or N:output, got '3-4'").
LayersSpec parse_layers_spec(std::string_view text);

// Checks the slice against a model with n_layers blocks; throws ds4::UsageError
// ("--layers 40:47 is outside the model's 32 layers (0..31)").
void layers_spec_check_against_model(const LayersSpec& spec, int n_layers);

}  // namespace ds4

// One random-weight tensor of a synthetic model, added to a GGUF being
// written and generated chunk by chunk as the writer streams it out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "synth/weights.h"

namespace ds4 {

class GgufWriter;

// Adds tensor `name` of `type` and shape `ne` to `w`. Block formats that
// synth/random_blocks.h supports are random blocks with set scales; every
// other type is drawn as floats from `dist` and converted
// (synth/weights.h). The bytes depend on (model_seed, name, type, dist)
// only. `progress`: a "writing NAME" line on stderr when it starts. Throws
// ds4::UsageError when the rows are not whole blocks of `type`.
void add_random_tensor(GgufWriter& w, const std::string& name, GgmlType type, std::vector<int64_t> ne,
                       const WeightDistribution& dist, uint64_t model_seed, bool progress);

}  // namespace ds4

// The DeepSeek V4 part of `ds4-gguf inspect`: the per-layer schedule
// (attention kind, hash-routed or scored MoE) and the quant mix by tensor role.
#pragma once

#include <ostream>

#include "gguf/gguf_file.h"

namespace ds4 {

// Prints the schedule from the metadata (compress_ratios, hash_layer_count),
// warns where the tensors disagree with it, and the tensor types per role.
// Never throws for odd metadata: a missing key is reported as a line.
void inspect_deepseek4(const GgufFile& file, std::ostream& out);

}  // namespace ds4

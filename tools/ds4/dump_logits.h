// The differential interface: evaluate raw token ids, write every
// position's logits as float32 little-endian, n_tokens x n_vocab, row-major.
#pragma once

#include "cli/ds4_options.h"
#include "engine/engine.h"

namespace ds4 {

int run_dump_logits(Engine& engine, const Ds4Options& opts);

}  // namespace ds4

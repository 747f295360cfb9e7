// Writes an expert pack (experts/expert_pack.h) for a GGUF model: what
// `ds4-gguf pack IN OUT` runs.
#pragma once

#include <cstdint>
#include <string>

#include "experts/expert_pack.h"

namespace ds4 {

class GgufFile;

// The pack's layout for `file`: one block per blk.N that has
// ffn_gate_exps, ffn_up_exps and ffn_down_exps weights (3-D, one matrix per
// expert), with a part for each per-expert .scale of them (a scale of one
// value for all experts stays in the GGUF). Throws ds4::Error when the file
// has no routed experts or a block's tensors disagree.
PackLayout plan_expert_pack(const GgufFile& file, const std::string& identity);

struct PackWriteStats {
    uint64_t records = 0, bytes = 0;
    double seconds = 0;
};

// Streams every expert's bytes from `file` into `out` (a few tensor ranges
// of up to kPackCopyBytes at a time, never the whole model in memory),
// through a temporary file beside it and a rename, so an interrupted pack
// leaves no file that looks whole. Throws ds4::Error naming the file on an
// I/O error.
constexpr uint64_t kPackCopyBytes = uint64_t(64) << 20;
PackWriteStats write_expert_pack(const GgufFile& file, const std::string& identity, const std::string& out);

}  // namespace ds4

// Reading a family's hyper-parameters: "<arch>.<key>" metadata with defaults,
// and the RoPE settings every llama.cpp-style family derives the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "gguf/gguf_file.h"

namespace ds4 {

class Hparams {
public:
    Hparams(const GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

    uint64_t require_uint(const std::string& key) const;   // "<arch>.<key>"
    uint64_t uint_or(const std::string& key, uint64_t dflt) const;
    double float_or(const std::string& key, double dflt) const;
    bool bool_or(const std::string& key, bool dflt) const;
    std::optional<std::string> string(const std::string& key) const;
    const GgufFile& file() const { return file_; }
    const std::string& arch() const { return arch_; }

private:
    // A per-layer array whose entries are all equal reads as that value.
    std::optional<uint64_t> uint_value(const std::string& key) const;
    const GgufFile& file_;
    std::string arch_;
};

// RoPE parameters as llama.cpp derives them from metadata for a default
// context: rope.freq_base, rope.scaling.{type,factor,original_context_length,
// attn_factor}, YaRN attention-factor correction.
RopeParams rope_params_from_metadata(const Hparams& hp, int n_rot, bool neox);

}  // namespace ds4

// Reading a family's hyper-parameters: "<arch>.<key>" metadata with defaults
// and ranges, and the RoPE settings every llama.cpp-style family derives the
// same way. Every value a loader uses is checked here, so a zero, negative,
// huge or NaN value is one sentence naming the key, never a division by
// zero, a wrapped int or a silently wrong model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "gguf/gguf_file.h"

namespace ds4 {

// Upper bound of widths and counts (embedding, heads, experts, ranks...):
// 64x the largest published model's, and small enough that a product of
// two never overflows int64 and each fits an int.
constexpr int64_t kMaxHparamCount = int64_t{1} << 24;
// Upper bound of context lengths (llama.cpp keeps them as uint32; positions are int32).
constexpr int64_t kMaxHparamContext = INT32_MAX;

// What a floating-point hyper-parameter may be (always finite).
enum class NumberRange { Any, NonNegative, Positive };

class Hparams {
public:
    Hparams(const GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

    // "<arch>.<key>", and in quotes, as messages name it.
    std::string key(const std::string& k) const { return arch_ + "." + k; }
    std::string quoted(const std::string& k) const;

    // An integer in [lo, hi]; a per-layer array whose entries are all equal
    // reads as that value. count() throws when the key is absent.
    int64_t count(const std::string& k, int64_t lo = 1, int64_t hi = kMaxHparamCount) const;
    int64_t count_or(const std::string& k, int64_t dflt, int64_t lo = 1, int64_t hi = kMaxHparamCount) const;
    // A finite number in `range`; the default is not checked.
    double number_or(const std::string& k, double dflt, NumberRange range) const;
    bool bool_or(const std::string& k, bool dflt) const;
    std::optional<std::string> string(const std::string& k) const;
    const GgufFile& file() const { return file_; }
    const std::string& arch() const { return arch_; }

private:
    std::optional<uint64_t> uint_value(const std::string& k) const;
    const GgufFile& file_;
    std::string arch_;
};

// RoPE parameters as llama.cpp derives them from metadata for a default
// context: rope.freq_base, rope.scaling.{type,factor,original_context_length,
// attn_factor}, YaRN attention-factor correction.
RopeParams rope_params_from_metadata(const Hparams& hp, int n_rot, bool neox);

}  // namespace ds4

// Strict parsing of option values. Every function takes the flag's name so
// its one-line ds4::UsageError names the flag and quotes what the user typed
// ("--threads must be an integer, got '4x'"). Nothing is silently clamped or
// truncated: "4.5" is not an integer, "1e999" is not a float.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ds4 {

// Decimal integer (optional sign), within [min, max] inclusive.
int64_t parse_int_value(std::string_view flag, std::string_view text, int64_t min, int64_t max);
// Non-negative decimal integer up to UINT64_MAX.
uint64_t parse_u64_value(std::string_view flag, std::string_view text);
// Finite float (decimal or exponent form). Range checks are the caller's,
// since ranges differ in openness ("(0, 1]").
double parse_float_value(std::string_view flag, std::string_view text);
// TCP port 1..65535.
int parse_port_value(std::string_view flag, std::string_view text);

// --ssd-streaming-cache-experts: either a number of expert slots ("N") or a
// memory budget ("NGB", also "N.5GB"; GB here means GiB, 2^30 bytes, and
// "G"/"GiB" are accepted too, case-insensitive). Exactly one field is set.
struct ExpertCacheBudget {
    uint64_t experts = 0;  // slots, when given as N
    uint64_t bytes = 0;    // bytes, when given as NGB
    bool by_bytes() const { return bytes != 0; }
};
ExpertCacheBudget parse_expert_cache_budget(std::string_view flag, std::string_view text);

// A memory size in GiB, "NGB" (also "N.5GB", "G", "GiB", any case; GB
// means 2^30 bytes as above), or "0": bytes, whole. At most 1e9 GiB.
uint64_t parse_gib_size(std::string_view flag, std::string_view text);

// --backend: "auto", "cpu" or "cuda".
std::string parse_backend_value(std::string_view flag, std::string_view text);
// --chat-template: a renderer ds4 knows, or "raw".
std::string parse_chat_template_value(std::string_view flag, std::string_view text);

// Quotes a value for an error message, shortening very long ones.
std::string quote_value(std::string_view text);

// A parser's message as one line: newlines become spaces, trailing spaces go
// (a usage error is printed as a single sentence).
std::string one_line(std::string s);

}  // namespace ds4

// What ds4-trace replay prints: one line for people, JSON for scripts.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "experts/trace_replay.h"

namespace ds4 {

// `bytes_per_expert` (0: unknown) prices the misses: bytes read from the
// disk and copied to the device per token.
std::string replay_line(const ReplayResult& r, uint64_t bytes_per_expert);
nlohmann::json replay_json(const ReplayResult& r, uint64_t bytes_per_expert, const std::string& trace_source);

}  // namespace ds4

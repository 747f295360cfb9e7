// A routing trace: the (layer, expert) choices of every step the expert
// cache served, in order, so the cache's policy can be replayed without the
// model (experts/trace_replay.h). Recorded by a run
// (--ssd-streaming-trace-out FILE) or generated (experts/routing_trace_synth.h).
//
// A text file, version 1, every line ending in '\n', fields separated by
// one space, numbers plain decimal (no sign, no leading zero):
//
//   ds4-routing-trace 1
//   source <printable text: where it came from>
//   experts-per-token K
//   block LAYER N_EXPERT          one per MoE block, layers ascending
//   route LAYER ROWS ID...        one per step of one block: ROWS x K ids
//   end N                         N route lines
//
// The trailer makes a file cut short read as damaged, not as a shorter run.
// Text because a trace is read by people too and compresses well; a
// 2,000-token trace of a 48-block model is a few MB.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "experts/cache_policy.h"

namespace ds4 {

inline constexpr const char* kRoutingTraceMagic = "ds4-routing-trace 1";
// Bounds a parser holds a file to (a damaged number cannot ask for more).
inline constexpr int64_t kTraceMaxExpertsPerToken = 1024;
inline constexpr int64_t kTraceMaxBlocks = 1 << 16;
inline constexpr int64_t kTraceMaxLayer = 1 << 20;
inline constexpr int64_t kTraceMaxExperts = 1 << 30;
inline constexpr int64_t kTraceMaxRows = 1 << 20;

// One step of one block: `rows` tokens' choices, ids[first .. first + rows * K).
struct TraceRoute {
    int layer = -1;
    int64_t rows = 0;
    uint64_t first = 0;
};

struct RoutingTrace {
    std::string source;
    int64_t experts_per_token = 0;
    std::vector<PolicyBlock> blocks;
    std::vector<TraceRoute> routes;
    std::vector<int32_t> ids;

    // The ids of route r.
    std::vector<int32_t> route_ids(size_t r) const;
    // Tokens the trace covers: every block sees every token once.
    uint64_t tokens() const;
    int64_t total_experts() const;
};

// Parses `text` (the file's bytes; `name` for the message). Throws
// ds4::Error, one sentence naming the line, for anything but a whole,
// well-formed trace.
RoutingTrace parse_routing_trace(std::string_view text, const std::string& name);
// Reads and parses `path`. Throws ds4::Error when it cannot be read or parsed.
RoutingTrace read_routing_trace(const std::string& path);
// The file's text for `trace` (what parse_routing_trace reads back).
std::string format_routing_trace(const RoutingTrace& trace);
// Writes `trace` to `path` through a temporary file and a rename. Throws
// ds4::Error when it cannot.
void write_routing_trace(const std::string& path, const RoutingTrace& trace);

// The header lines and one route line, shared by the formatter and the
// streaming writer a run uses.
std::string trace_header(const std::string& source, int64_t experts_per_token, const std::vector<PolicyBlock>& blocks);
std::string trace_route_line(int layer, int64_t rows, const int32_t* ids, size_t n);

}  // namespace ds4

// The --ssd-streaming flags, shared by ds4, ds4-bench and ds4-server: their
// values, parsed and checked before any model is loaded, each problem one
// ds4::UsageError naming the flag.
#pragma once

#include <string>

#include "cli/pipeline_flags.h"
#include "common/ssd_streaming.h"

namespace CLI {
class App;
}

namespace ds4 {

// The flags as typed, for CLI11.
struct SsdRawFlags {
    int enabled = 0;
    std::string cache, host_cache, prefill, io, overlap, lookahead, profile, preload, pack, trace_out, windows, simulate_used;
};

// Registers --ssd-streaming, --ssd-streaming-cache-experts, --ssd-streaming-host-cache,
// --ssd-streaming-prefill, --ssd-streaming-io, --ssd-streaming-overlap, --ssd-streaming-lookahead,
// --ssd-streaming-profile,
// --ssd-streaming-preload-experts, --ssd-streaming-pack, --ssd-streaming-trace-out,
// --ssd-streaming-windows and --simulate-used-memory.
void add_ssd_flags(CLI::App& app, SsdRawFlags& raw);

// Parses the values into `out`; every other flag needs --ssd-streaming,
// --ssd-streaming-preload-experts needs a profile, and the profile's
// directory must exist (it is written at exit); the pack must be an existing
// regular file (its contents are checked against the model at load); the
// trace's directory must exist; --simulate-used-memory must be a size no
// larger than the machine's RAM.
void parse_ssd_values(const SsdRawFlags& raw, const FlagGiven& given, SsdStreaming& out);

// The names of the flags that take a value (for programs that check that
// every value is present before CLI11 parses).
inline constexpr const char* kSsdValueFlags[] = {"--ssd-streaming-cache-experts", "--ssd-streaming-host-cache",
                                                 "--ssd-streaming-prefill",
                                                 "--ssd-streaming-io", "--ssd-streaming-overlap", "--ssd-streaming-lookahead",
                                                 "--ssd-streaming-profile",
                                                 "--ssd-streaming-preload-experts", "--ssd-streaming-pack",
                                                 "--ssd-streaming-trace-out", "--ssd-streaming-windows",
                                                 "--simulate-used-memory"};

// The help lines of these flags.
std::string ssd_help_text();

}  // namespace ds4

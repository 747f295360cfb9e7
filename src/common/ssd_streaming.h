// --ssd-streaming's settings, as the command line gives them and the engine
// takes them: the non-routed weights resident, the routed experts read from
// the file into a bounded expert cache.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ds4 {

// --ssd-streaming-prefill: how a step that needs many experts is served.
enum class PrefillStrategy {
    automatic,   // a whole block when the step overflows the cache or misses most of the block
    per_expert,  // only the experts chosen (prefill chunks shrink to fit the cache)
    full_layer,  // every multi-token step reads the block's whole routed tensors
};

// --ssd-streaming-io: which engine reads the file.
enum class ReadMethod { automatic, uring, pread };

// --ssd-streaming-windows: whether routed experts live in expert windows
// (experts/expert_windows.h) instead of the expert cache.
enum class ExpertWindowsMode { automatic, on, off };

struct SsdStreaming {
    bool enabled = false;
    // The cache budget: experts, or bytes; neither: automatic (a share of
    // the backend's available memory).
    uint64_t experts = 0;
    uint64_t bytes = 0;
    // The host-RAM tier's budget (CUDA: page-locked slots between the file
    // and the device cache): experts or bytes; neither: automatic; off:
    // none (--ssd-streaming-host-cache 0).
    uint64_t host_experts = 0;
    uint64_t host_bytes = 0;
    bool host_off = false;
    // --simulate-used-memory: bytes the automatic budgets (the cache, the
    // host tier) take as already in use, of RAM and of device memory both,
    // so that a model that fits can be run as one that does not. Budgets
    // only: nothing is allocated.
    uint64_t simulated_used = 0;
    PrefillStrategy prefill = PrefillStrategy::automatic;
    ReadMethod io = ReadMethod::automatic;
    // --ssd-streaming-overlap: on the CPU a step computes the experts it
    // holds (and its shared expert) while its misses are read; off: it
    // waits for the reads first (to measure what the overlap gains).
    bool overlap = true;
    // --ssd-streaming-lookahead: with the overlap, the next block's likely
    // experts (its router on this block's FFN input) are read while its
    // attention computes. Off by default: on the 2-core CPU run of
    // bench/RESULTS.md (2026-12-03) its wrong guesses cost more disk time
    // than its right ones saved.
    bool lookahead = false;
    // --ssd-streaming-profile: routing counts read at start (to preload the
    // hottest experts) and written back, added to, at exit.
    std::string profile;
    // --ssd-streaming-preload-experts: how many of the profile's hottest
    // experts to load before the first token (default: as many as fit).
    std::optional<int64_t> preload;
    // --ssd-streaming-pack: an expert pack of the model file (ds4-gguf
    // pack); misses are read from it, one request per expert.
    std::string pack;
    // --ssd-streaming-trace-out: every step's routing, as the expert cache
    // saw it, written there (experts/routing_trace.h) for ds4-trace replay.
    std::string trace_out;
    // automatic: windows where the backend offers them (CUDA), the host tier
    // would hold every expert and the device budget would not.
    ExpertWindowsMode windows = ExpertWindowsMode::automatic;
};

}  // namespace ds4

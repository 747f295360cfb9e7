#include "cli/ssd_flags.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "cli/cli_values.h"
#include "common/error.h"
#include "common/host_memory.h"

namespace ds4 {

void add_ssd_flags(CLI::App& app, SsdRawFlags& raw) {
    app.add_flag("--ssd-streaming", raw.enabled);
    app.add_option("--ssd-streaming-cache-experts", raw.cache);
    app.add_option("--ssd-streaming-host-cache", raw.host_cache);
    app.add_option("--ssd-streaming-prefill", raw.prefill);
    app.add_option("--ssd-streaming-io", raw.io);
    app.add_option("--ssd-streaming-overlap", raw.overlap);
    app.add_option("--ssd-streaming-lookahead", raw.lookahead);
    app.add_option("--ssd-streaming-profile", raw.profile);
    app.add_option("--ssd-streaming-preload-experts", raw.preload);
    app.add_option("--ssd-streaming-pack", raw.pack);
    app.add_option("--ssd-streaming-trace-out", raw.trace_out);
    app.add_option("--ssd-streaming-windows", raw.windows);
    app.add_option("--simulate-used-memory", raw.simulate_used);
}

void parse_ssd_values(const SsdRawFlags& raw, const FlagGiven& given, SsdStreaming& o) {
    o.enabled = raw.enabled > 0;
    for (const char* f : kSsdValueFlags)
        if (given(f) && !o.enabled) throw UsageError(std::string(f) + " needs --ssd-streaming");
    if (given("--ssd-streaming-cache-experts")) {
        const ExpertCacheBudget b = parse_expert_cache_budget("--ssd-streaming-cache-experts", raw.cache);
        o.experts = b.experts;
        o.bytes = b.bytes;
    }
    if (given("--ssd-streaming-host-cache")) {
        if (raw.host_cache == "0") {
            o.host_off = true;
        } else {
            const ExpertCacheBudget b = parse_expert_cache_budget("--ssd-streaming-host-cache", raw.host_cache);
            o.host_experts = b.experts;
            o.host_bytes = b.bytes;
        }
    }
    if (given("--ssd-streaming-prefill")) {
        if (raw.prefill == "auto") o.prefill = PrefillStrategy::automatic;
        else if (raw.prefill == "per-expert") o.prefill = PrefillStrategy::per_expert;
        else if (raw.prefill == "full-layer") o.prefill = PrefillStrategy::full_layer;
        else throw UsageError("--ssd-streaming-prefill must be auto, per-expert or full-layer, got " + quote_value(raw.prefill));
    }
    if (given("--ssd-streaming-io")) {
        if (raw.io == "auto") o.io = ReadMethod::automatic;
        else if (raw.io == "io_uring") o.io = ReadMethod::uring;
        else if (raw.io == "pread") o.io = ReadMethod::pread;
        else throw UsageError("--ssd-streaming-io must be auto, io_uring or pread, got " + quote_value(raw.io));
    }
    if (given("--ssd-streaming-overlap")) {
        if (raw.overlap == "on") o.overlap = true;
        else if (raw.overlap == "off") o.overlap = false;
        else throw UsageError("--ssd-streaming-overlap must be on or off, got " + quote_value(raw.overlap));
    }
    if (given("--ssd-streaming-lookahead")) {
        if (raw.lookahead == "on") o.lookahead = true;
        else if (raw.lookahead == "off") o.lookahead = false;
        else throw UsageError("--ssd-streaming-lookahead must be on or off, got " + quote_value(raw.lookahead));
    }
    if (given("--ssd-streaming-windows")) {
        if (raw.windows == "auto") o.windows = ExpertWindowsMode::automatic;
        else if (raw.windows == "on") o.windows = ExpertWindowsMode::on;
        else if (raw.windows == "off") o.windows = ExpertWindowsMode::off;
        else throw UsageError("--ssd-streaming-windows must be auto, on or off, got " + quote_value(raw.windows));
    }
    if (given("--ssd-streaming-profile")) {
        if (raw.profile.empty()) throw UsageError("--ssd-streaming-profile needs a file name");
        namespace fs = std::filesystem;
        const fs::path dir = fs::path(raw.profile).parent_path();
        std::error_code ec;
        if (!dir.empty() && !fs::is_directory(dir, ec))
            throw UsageError("--ssd-streaming-profile: directory " + quote_value(dir.string()) + " does not exist");
        if (fs::is_directory(raw.profile, ec))
            throw UsageError("--ssd-streaming-profile " + quote_value(raw.profile) + " is a directory, not a file");
        o.profile = raw.profile;
    }
    if (given("--ssd-streaming-preload-experts")) {
        if (o.profile.empty()) throw UsageError("--ssd-streaming-preload-experts needs --ssd-streaming-profile FILE");
        o.preload = parse_int_value("--ssd-streaming-preload-experts", raw.preload, 0, int64_t(1) << 40);
    }
    if (given("--ssd-streaming-pack")) {
        // Only that it is there: whether it is a whole pack of this model
        // is known once the model is open (exit 1 then).
        namespace fs = std::filesystem;
        std::error_code ec;
        if (raw.pack.empty()) throw UsageError("--ssd-streaming-pack needs a file name");
        if (!fs::exists(raw.pack, ec))
            throw UsageError("--ssd-streaming-pack: no file " + quote_value(raw.pack) + " (ds4-gguf pack MODEL FILE writes one)");
        if (!fs::is_regular_file(raw.pack, ec))
            throw UsageError("--ssd-streaming-pack " + quote_value(raw.pack) + " is not a regular file");
        o.pack = raw.pack;
    }
    if (given("--ssd-streaming-trace-out")) {
        // Created at load, written while the run goes, ended at exit.
        namespace fs = std::filesystem;
        std::error_code ec;
        if (raw.trace_out.empty()) throw UsageError("--ssd-streaming-trace-out needs a file name");
        const fs::path dir = fs::path(raw.trace_out).parent_path();
        if (!dir.empty() && !fs::is_directory(dir, ec))
            throw UsageError("--ssd-streaming-trace-out: directory " + quote_value(dir.string()) + " does not exist");
        if (fs::is_directory(raw.trace_out, ec))
            throw UsageError("--ssd-streaming-trace-out " + quote_value(raw.trace_out) + " is a directory, not a file");
        o.trace_out = raw.trace_out;
    }
    if (given("--simulate-used-memory")) {
        o.simulated_used = parse_gib_size("--simulate-used-memory", raw.simulate_used);
        // More than the machine has is a typo, not a smaller machine.
        const uint64_t ram = total_host_memory();
        if (ram > 0 && o.simulated_used > ram) {
            char gib[32];
            std::snprintf(gib, sizeof gib, "%.2f", double(ram) / double(uint64_t{1} << 30));
            throw UsageError("--simulate-used-memory " + quote_value(raw.simulate_used) +
                             " is more than this machine's " + gib + " GiB of RAM");
        }
    }
}

std::string ssd_help_text() {
    return R"(      --ssd-streaming       keep only the non-routed weights resident; read routed
                            experts from the file into a bounded cache
      --ssd-streaming-cache-experts N|NGB
                            expert cache size: N expert slots, or NGB GiB of
                            memory (default: half of the available device or
                            host memory less 2 GiB; host memory within the
                            memory cgroup's limit); any size works, 1 included
      --ssd-streaming-host-cache N|NGB|0
                            CUDA: page-locked host RAM for experts between the
                            file and the device cache (default: half of the
                            available RAM less 4 GiB; 0: none)
      --ssd-streaming-prefill auto|per-expert|full-layer
                            a prompt chunk reads only the experts it picks
                            (per-expert), or each block's routed tensors whole
                            (full-layer); auto picks per chunk (default: auto)
      --ssd-streaming-io auto|io_uring|pread
                            how experts are read: io_uring with O_DIRECT where the
                            file system allows it, or a pool of pread threads
                            (default: auto, io_uring when the kernel has it)
      --ssd-streaming-overlap on|off
                            CPU: compute the experts a step holds, and its shared
                            expert, while its misses are read (default: on; off
                            waits for the reads first)
      --ssd-streaming-lookahead on|off
                            CPU, with the overlap: read the next block's likely
                            experts (its router on this block's input) while
                            its attention computes (default: off)
      --ssd-streaming-windows auto|on|off
                            CUDA: keep every routed expert in page-locked RAM,
                            read by the GPU where it lies, the most used moved
                            into the device budget between steps; decode steps
                            replay as graphs (default: auto, the windows where
                            every expert fits in RAM but not on the GPU, else
                            the expert cache; on: the windows, also on the CPU,
                            for tests; off: the cache)
      --ssd-streaming-profile FILE
                            routing counts: read at start to preload the experts
                            used most, written back (added to) at exit
      --ssd-streaming-preload-experts N
                            preload the N hottest experts of the profile
                            (default: as many as the cache holds)
      --ssd-streaming-pack FILE
                            read each missed expert in one request from FILE, an
                            expert-major copy of the model's routed experts
                            written by ds4-gguf pack (the model is unchanged)
      --ssd-streaming-trace-out FILE
                            write every step's routing, as the expert cache saw
                            it, to FILE (a routing trace: ds4-trace replay FILE
                            replays it through the cache's policy at any budget)
      --simulate-used-memory NGB
                            budget the automatic sizes above (the cache, the host
                            tier) as if N GiB of RAM, and on CUDA also of device
                            memory, were already in use: a model that fits runs
                            as one that does not. Budgets only: nothing is
                            allocated and the page cache is not limited (for a
                            hard cap run under a cgroup memory limit); sizes
                            given as N|NGB are unchanged. At most the machine's RAM
)";
}

}  // namespace ds4

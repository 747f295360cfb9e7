// ds4-trace: routing traces of the expert cache, without a model.
//
//   ds4-trace gen --blocks N --experts E --experts-per-token K --tokens T
//                 (--zipf S | --uniform) [--seed N] --out FILE
//   ds4-trace replay FILE (--device-experts N | --device-fraction F)
//                 [--host-experts N | --host-fraction F] [--prefill auto|per-expert|full-layer]
//                 [--bytes-per-expert N] [--json FILE]
//
// A program of its own: neither needs a model file (ds4-bench always loads
// or builds one to time it; ds4-gguf reads and writes GGUF files), and a
// replay is a count, the same on any machine. Traces a run records come
// from --ssd-streaming-trace-out on ds4, ds4-bench and ds4-server.
//
// Exit status: 0 success, 1 a file could not be read, parsed or written
// (one sentence on stderr), 2 bad command line.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>

#include "cli/cli_values.h"
#include "common/error.h"
#include "experts/routing_trace.h"
#include "experts/routing_trace_synth.h"
#include "experts/trace_replay.h"
#include "replay_report.h"

namespace {

using ds4::UsageError;

const char* kHelp = R"(usage:
  ds4-trace gen --blocks N --experts E --experts-per-token K --tokens T
                (--zipf S | --uniform) [--seed N] --out FILE
      write a routing trace of T decode steps for a model of N MoE blocks of
      E routed experts, K per token: per block, expert popularity Zipf(S)
      over a random permutation of the ids (--uniform: S = 0); each token's
      K distinct experts drawn in proportion to popularity
      --seed N               (default: a fresh one, printed)
  ds4-trace replay FILE (--device-experts N | --device-fraction F) [options]
      replay a trace through the expert cache's own policy (eviction by
      decayed routing frequency, scratch for cold misses, the host tier's
      LRU) and print hits, misses per token and evictions on one line
      --device-experts N     device slots, as --ssd-streaming-cache-experts N
      --device-fraction F    device slots as a fraction (0, 1] of all experts
      --host-experts N, --host-fraction F
                             the CUDA host tier, as --ssd-streaming-host-cache
                             (default: none)
      --prefill auto|per-expert|full-layer
                             as --ssd-streaming-prefill (default auto)
      --bytes-per-expert N   price the misses in bytes (the plan line's
                             "routed experts of X")
      --json FILE            also write the counts as JSON
  ds4-trace --help | --version

exit status: 0 ok, 1 unreadable or invalid trace, 2 bad command line
)";

std::string one_line(std::string s) {
    for (char& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    return s;
}

// Slots for a budget given as a count or a fraction of `total` (at least
// one when a fraction is not 0).
int64_t budget(const CLI::Option* count_opt, const std::string& count, const CLI::Option* frac_opt,
               const std::string& frac, const char* count_flag, const char* frac_flag, int64_t min_count,
               int64_t total) {
    if (count_opt->count() && frac_opt->count())
        throw UsageError(std::string("give ") + count_flag + " or " + frac_flag + ", not both");
    if (count_opt->count()) return ds4::parse_int_value(count_flag, count, min_count, int64_t(1) << 40);
    if (!frac_opt->count()) return -1;
    const double f = ds4::parse_float_value(frac_flag, frac);
    if (!(f >= 0 && f <= 1)) throw UsageError(std::string(frac_flag) + " must be between 0 and 1, got " + frac);
    if (f == 0 && min_count > 0) throw UsageError(std::string(frac_flag) + " must be more than 0");
    if (f == 0) return 0;
    return std::max<int64_t>(1, std::llround(f * double(total)));
}

int run(int argc, char** argv) {
    CLI::App app{"ds4-trace"};
    app.set_help_flag();
    bool help = false, version = false;
    app.add_flag("-h,--help", help);
    app.add_flag("--version", version);

    CLI::App* gen = app.add_subcommand("gen", "write a generated routing trace");
    std::string blocks_text, experts_text, used_text, tokens_text, zipf_text, seed_text, out;
    bool uniform = false;
    gen->add_option("--blocks", blocks_text)->required();
    gen->add_option("--experts", experts_text)->required();
    gen->add_option("--experts-per-token", used_text)->required();
    gen->add_option("--tokens", tokens_text)->required();
    const CLI::Option* zipf_opt = gen->add_option("--zipf", zipf_text);
    gen->add_flag("--uniform", uniform);
    gen->add_option("--seed", seed_text);
    gen->add_option("--out", out)->required();

    CLI::App* replay = app.add_subcommand("replay", "replay a routing trace through the expert cache's policy");
    std::string trace_path, dev_n, dev_f, host_n, host_f, prefill_text, bytes_text, json_path;
    replay->add_option("FILE", trace_path)->required();
    const CLI::Option* dev_n_opt = replay->add_option("--device-experts", dev_n);
    const CLI::Option* dev_f_opt = replay->add_option("--device-fraction", dev_f);
    const CLI::Option* host_n_opt = replay->add_option("--host-experts", host_n);
    const CLI::Option* host_f_opt = replay->add_option("--host-fraction", host_f);
    const CLI::Option* prefill_opt = replay->add_option("--prefill", prefill_text);
    const CLI::Option* bytes_opt = replay->add_option("--bytes-per-expert", bytes_text);
    replay->add_option("--json", json_path);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        throw UsageError(one_line(e.what()) + " (see --help)");
    }
    if (help) {
        std::cout << kHelp;
        return 0;
    }
    if (version) {
        std::cout << "ds4-trace " << DS4_VERSION << "\n";
        return 0;
    }

    if (gen->parsed()) {
        ds4::TraceShape shape;
        shape.blocks = ds4::parse_int_value("--blocks", blocks_text, 1, ds4::kTraceMaxBlocks);
        shape.experts = ds4::parse_int_value("--experts", experts_text, 1, 1 << 20);
        shape.experts_per_token =
            ds4::parse_int_value("--experts-per-token", used_text, 1, std::min(shape.experts, ds4::kTraceMaxExpertsPerToken));
        const int64_t tokens = ds4::parse_int_value("--tokens", tokens_text, 1, int64_t(1) << 24);
        if (uniform == (zipf_opt->count() > 0)) throw UsageError("give exactly one of --zipf S and --uniform");
        double s = 0;
        if (!uniform) {
            s = ds4::parse_float_value("--zipf", zipf_text);
            if (!(s >= 0 && s <= 16)) throw UsageError("--zipf must be between 0 and 16, got " + zipf_text);
        }
        const uint64_t seed = seed_text.empty() ? (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()
                                                : ds4::parse_u64_value("--seed", seed_text);
        const ds4::RoutingTrace t = ds4::zipf_routing_trace(shape, uint64_t(tokens), s, seed);
        ds4::write_routing_trace(out, t);
        std::cout << "wrote " << out << ": " << t.source << "; " << shape.blocks << " blocks x " << shape.experts
                  << " experts, " << shape.experts_per_token << " per token\n";
        return 0;
    }
    if (replay->parsed()) {
        ds4::ReplayOptions o;
        if (prefill_opt->count()) {
            if (prefill_text == "auto") o.prefill = ds4::PrefillStrategy::automatic;
            else if (prefill_text == "per-expert") o.prefill = ds4::PrefillStrategy::per_expert;
            else if (prefill_text == "full-layer") o.prefill = ds4::PrefillStrategy::full_layer;
            else throw UsageError("--prefill must be auto, per-expert or full-layer, got " + ds4::quote_value(prefill_text));
        }
        const uint64_t bytes = bytes_opt->count() ? ds4::parse_u64_value("--bytes-per-expert", bytes_text) : 0;
        if (!dev_n_opt->count() && !dev_f_opt->count())
            throw UsageError("replay needs a device budget: --device-experts N or --device-fraction F");
        // Every flag checked before the trace is read (the fractions then
        // need its size).
        budget(dev_n_opt, dev_n, dev_f_opt, dev_f, "--device-experts", "--device-fraction", 1, 1);
        budget(host_n_opt, host_n, host_f_opt, host_f, "--host-experts", "--host-fraction", 0, 1);
        const ds4::RoutingTrace t = ds4::read_routing_trace(trace_path);
        const int64_t total = t.total_experts();
        o.device_slots = budget(dev_n_opt, dev_n, dev_f_opt, dev_f, "--device-experts", "--device-fraction", 1, total);
        o.host_slots = std::max<int64_t>(
            0, budget(host_n_opt, host_n, host_f_opt, host_f, "--host-experts", "--host-fraction", 0, total));
        const ds4::ReplayResult r = ds4::replay_trace(t, o);
        std::cout << ds4::replay_line(r, bytes) << "\n";
        if (!json_path.empty()) {
            std::ofstream j(json_path, std::ios::trunc);
            j << ds4::replay_json(r, bytes, t.source).dump(2) << "\n";
            j.flush();
            if (!j) throw ds4::Error("cannot write " + json_path + ".");
        }
        return 0;
    }
    throw UsageError("a command is required: gen or replay (see --help)");
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const ds4::UsageError& e) {
        std::fprintf(stderr, "ds4-trace: %s\n", e.what());
        return 2;
    } catch (const ds4::Error& e) {
        std::fprintf(stderr, "ds4-trace: %s\n", e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "ds4-trace: out of memory.\n");
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ds4-trace: %s\n", one_line(e.what()).c_str());
        return 1;
    }
}

// ds4-bench: prefill and generation speed of a model at a series of context
// depths, as CSV (ctx,prefill_tps,gen_tps,kv_bytes). The model is a GGUF file
// (-m) or a synthetic one of a real shape built in memory (--synthetic).
// Every argument is checked before the model is loaded or built: bad input
// is one line and exit 2, a load or run failure the loader's sentence and
// exit 1.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "bench_walk.h"
#include "cli/cli_values.h"
#include "cli/ssd_flags.h"
#include "common/error.h"
#include "common/layer_range.h"
#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "models/family.h"
#include "synth/bench_preset.h"
#include "synth/decode_traffic.h"
#include "synth/memory_file.h"

namespace {

using ds4::UsageError;

// Same bound as the ds4 program's --ctx: beyond any trained context, small
// enough that sizes never overflow.
constexpr int64_t kMaxContext = int64_t{1} << 24;

const char* const kHelp =
    "usage: ds4-bench -m MODEL [options]\n"
    "\n"
    "Walks one fixed pseudo-random token sequence to context frontiers: ctx-start,\n"
    "then +step-incr or x step-mul, up to ctx-max. Between frontiers only the new\n"
    "interval is prefilled (timed); at each frontier a greedy generation probe of\n"
    "--gen-tokens tokens runs on a snapshot of the state, which is then restored.\n"
    "Prints CSV rows ctx,prefill_tps,gen_tps,kv_bytes (header first) and a summary\n"
    "on stderr. kv_bytes: the model state sized for exactly ctx positions.\n"
    "\n"
    "  -m, --model FILE       GGUF model (or --synthetic)\n"
    "  --backend NAME         auto, cpu or cuda (default auto: CUDA when the build has it\n"
    "                         and a GPU is present, else the CPU)\n"
    "  --cuda-host-weights    CUDA reads weights from registered host memory\n"
    "  --int8-activations     CUDA decode on activations rounded to 8 bits per 32 (llama.cpp's\n"
    "                         mmvq rule; default: float activations)\n"
    "  --exact                CUDA prefill in FP32 (default: f16 tensor cores, f32 sums)\n"
    "  --ssd-streaming        routed experts read from the file into a bounded cache\n"
    "                         (as ds4's; its hits, misses and bytes read are printed)\n"
    "  --ssd-streaming-cache-experts N|NGB, --ssd-streaming-prefill auto|per-expert|full-layer,\n"
    "  --ssd-streaming-io auto|io_uring|pread, --ssd-streaming-overlap on|off,\n"
    "  --ssd-streaming-lookahead on|off, --ssd-streaming-profile FILE,\n"
    "  --ssd-streaming-preload-experts N, --ssd-streaming-pack FILE,\n"
    "  --ssd-streaming-trace-out FILE, --ssd-streaming-windows auto|on|off,\n"
    "  --simulate-used-memory NGB\n"
    "                         as ds4's (see ds4 --help)\n"
    "  -t, --threads N        CPU threads (default: all cores)\n"
    "  --check-tensors        read every weight of the layers run before the walk and\n"
    "                         stop at the first NaN or infinity\n"
    "  --ctx-start N          first frontier (default 512)\n"
    "  --ctx-max N            last frontier at most (default 4096)\n"
    "  --step-incr N          frontiers grow by N tokens\n"
    "  --step-mul X           frontiers grow by a factor X > 1 (rounded up)\n"
    "                         (exactly one of --step-incr and --step-mul)\n"
    "  --gen-tokens N         tokens per generation probe (default 32)\n"
    "  --prefill-chunk N      tokens per prefill forward pass (default 512)\n"
    "  --parallel N           N sequences side by side, each at the same depth, prefilled\n"
    "                         and decoded together in one batch per forward pass (default\n"
    "                         1); the CSV then adds parallel,gen_tps_per_seq and the rates\n"
    "                         count the tokens of all N\n"
    "  --op-by-op             decode op by op, never replaying a recorded step (to\n"
    "                         measure what the recording gains)\n"
    "  --host-argmax          copy every decode step's logits to the host and take the\n"
    "                         argmax there, instead of on the backend (to measure what\n"
    "                         that costs)\n"
    "  --seed N               seed of the token sequence (default 0)\n"
    "  --csv FILE             write the CSV there instead of stdout\n"
    "  --json FILE            also write {model, layers, weights_bytes_per_token, rows}\n"
    "  --synthetic PRESET     random weights of a real shape, built in memory (no\n"
    "                         file; seeded by --seed) instead of -m:\n"
    "                         ARCH-SIZE-QUANT, e.g. qwen3-30b-a3b-q4_k_m,\n"
    "                         qwen3-235b-a22b-q8_0, deepseek4-flash-q2 (an unknown\n"
    "                         name lists them all)\n"
    "  --layers A:B           run blocks A through B, both inclusive (as ds4's\n"
    "                         --layers: 0:0 is one block), or N:output for block N\n"
    "                         through the last; the embedding and the output head\n"
    "                         always run. With --synthetic only those blocks are\n"
    "                         built. Printed and in --json in the same spelling.\n"
    "  --n-layer N            with --synthetic: the preset truncated to its first N\n"
    "                         blocks (a trailing MTP block stays), as ds4-gguf synth\n"
    "                         --n-layer writes it: a full-width model small enough for\n"
    "                         the memory at hand\n"
    "  -h, --help             this text\n"
    "  --version              program version\n";

std::string one_line(std::string s) {
    for (char& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    return s;
}

struct BenchArgs {
    std::string model, backend = "auto", csv, json, synthetic, layers;
    int n_layer = 0;  // --n-layer (0: not given)
    std::optional<ds4::SyntheticPreset> preset;
    std::optional<ds4::LayerRange> layers_spec;
    int threads = 0;
    ds4::BenchWalkOptions walk;
    bool help = false, version = false, cuda_host_weights = false, int8_activations = false, exact = false, check_tensors = false;
    ds4::SsdStreaming ssd;  // --ssd-streaming and its flags
};

BenchArgs parse_args(int argc, char** argv) {
    BenchArgs a;
    a.walk.seed = 0;
    a.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    CLI::App app{"ds4-bench"};
    app.set_help_flag();
    app.add_flag("-h,--help", a.help);
    app.add_flag("--version", a.version);
    app.add_flag("--cuda-host-weights", a.cuda_host_weights);
    app.add_flag("--int8-activations", a.int8_activations);
    app.add_flag("--exact", a.exact);
    app.add_flag("--check-tensors", a.check_tensors);
    ds4::SsdRawFlags ssd;
    ds4::add_ssd_flags(app, ssd);
    app.add_option("-m,--model", a.model)->check(CLI::ExistingFile);
    app.add_option("--backend", a.backend)->check(CLI::IsMember({"auto", "cpu", "cuda"}));
    app.add_option("-t,--threads", a.threads)->check(CLI::Range(1, 4096));
    app.add_option("--ctx-start", a.walk.ctx_start)->check(CLI::Range(int64_t{1}, kMaxContext));
    app.add_option("--ctx-max", a.walk.ctx_max)->check(CLI::Range(int64_t{1}, kMaxContext));
    auto* incr = app.add_option("--step-incr", a.walk.step_incr)->check(CLI::Range(int64_t{1}, kMaxContext));
    // CLI::Range lets NaN through (every comparison with it is false).
    const CLI::Validator above_one(
        [](std::string& s) -> std::string {
            double x = 0;
            if (!CLI::detail::lexical_cast(s, x) || !std::isfinite(x) || !(x > 1.0) || x > 1e6)
                return "must be a number in (1, 1e6], got '" + s + "'";
            return {};
        },
        "X > 1");
    auto* mul = app.add_option("--step-mul", a.walk.step_mul)->check(above_one);
    incr->excludes(mul);
    app.add_option("--gen-tokens", a.walk.gen_tokens)->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    app.add_option("--prefill-chunk", a.walk.prefill_chunk)->check(CLI::Range(int64_t{1}, kMaxContext));
    app.add_option("--parallel", a.walk.parallel)->check(CLI::Range(1, 1024));
    app.add_flag("--op-by-op", a.walk.op_by_op);
    app.add_flag("--host-argmax", a.walk.host_argmax);
    // CLI11 would wrap "-1" to 2^64-1; a seed is plain digits.
    const CLI::Validator digits(
        [](std::string& s) -> std::string {
            if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos)
                return "must be a non-negative integer, got '" + s + "'";
            return {};
        },
        "N");
    app.add_option("--seed", a.walk.seed)->check(digits);
    app.add_option("--csv", a.csv)->check(CLI::NonexistentPath | CLI::ExistingFile);
    app.add_option("--json", a.json)->check(CLI::NonexistentPath | CLI::ExistingFile);
    app.add_option("--synthetic", a.synthetic);
    app.add_option("--layers", a.layers);
    auto* n_layer = app.add_option("--n-layer", a.n_layer);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        throw UsageError(one_line(e.what()));
    }
    if (a.help || a.version) return a;
    ds4::parse_ssd_values(ssd, [&](const char* f) { return app.count(f) > 0; }, a.ssd);
    if (!a.model.empty() && !a.synthetic.empty())
        throw UsageError("-m/--model and --synthetic exclude each other: give a file or a preset.");
    if (a.cuda_host_weights && a.backend != "cuda") throw UsageError("--cuda-host-weights needs --backend cuda.");
    if (a.int8_activations && a.backend == "cpu") throw UsageError("--int8-activations is a CUDA mode; the CPU backend is always exact.");
    if (a.int8_activations && a.exact) throw UsageError("--exact and --int8-activations contradict each other.");
    if (a.model.empty() && a.synthetic.empty())
        throw UsageError("-m/--model FILE or --synthetic PRESET is required (see --help).");
    if (n_layer->count() > 0 && a.synthetic.empty())
        throw UsageError("--n-layer truncates a --synthetic preset; a model file has the blocks it has.");
    if (!a.synthetic.empty()) a.preset = ds4::synthetic_preset(a.synthetic);
    if (a.preset && n_layer->count() > 0) a.preset = ds4::truncate_synthetic_preset(*a.preset, a.n_layer);
    if (!a.layers.empty()) {
        a.layers_spec = ds4::parse_layer_range(a.layers);
        // A preset's layer count is known now (so nothing is built for a bad
        // slice); a file's once it is opened.
        if (a.preset) ds4::check_layers_flag(*a.layers_spec, a.preset->n_layer);
    }
    if (a.walk.ctx_max < a.walk.ctx_start)
        throw UsageError("--ctx-max (" + std::to_string(a.walk.ctx_max) + ") must be at least --ctx-start (" +
                         std::to_string(a.walk.ctx_start) + ").");
    if (incr->count() == 0 && mul->count() == 0) throw UsageError("give one of --step-incr N or --step-mul X.");
    if (a.walk.ctx_max + a.walk.gen_tokens > kMaxContext)
        throw UsageError("--ctx-max plus --gen-tokens must be at most " + std::to_string(kMaxContext) + " tokens.");
    return a;
}

constexpr double kGiB = double(uint64_t{1} << 30);

// The blocks to run: the --layers slice (checked against the model's
// n_layer, one sentence naming it), or all of them.
ds4::LayerRange blocks_to_run(const std::optional<ds4::LayerRange>& spec, int n_layer) {
    return spec ? ds4::check_layers_flag(*spec, n_layer) : ds4::LayerRange{0, n_layer};
}

// How output names the slice: as given to --layers, else every block, in
// the ds4 spelling ("0:3", "1:output").
std::string layers_spelling(const std::optional<ds4::LayerRange>& spec, int n_layer) {
    return (spec ? *spec : ds4::LayerRange{0, n_layer}).spelling();
}

int run_bench(const BenchArgs& a) {
    // Opened before the model is read, so an unwritable path costs nothing.
    std::FILE* out = stdout;
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> csv_file(nullptr, std::fclose);
    if (!a.csv.empty()) {
        csv_file.reset(std::fopen(a.csv.c_str(), "w"));
        if (!csv_file) throw UsageError("--csv: cannot write '" + a.csv + "'.");
        out = csv_file.get();
    }
    std::ofstream json_file;
    if (!a.json.empty()) {
        json_file.open(a.json);
        if (!json_file) throw UsageError("--json: cannot write '" + a.json + "'.");
    }

    // The model: a file, or a synthetic one built into memory and then
    // opened by the same path-based loader as a file.
    std::unique_ptr<ds4::MemoryModelFile> memory_model;
    std::string path = a.model;
    if (a.preset) {
        const ds4::LayerRange build_range = blocks_to_run(a.layers_spec, a.preset->n_layer);
        const auto t0 = std::chrono::steady_clock::now();
        memory_model = ds4::MemoryModelFile::build(*a.preset, a.walk.seed, build_range);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const std::string truncated =
            a.preset->truncate_to ? " --n-layer " + std::to_string(a.preset->truncate_to) : std::string();
        std::fprintf(stderr, "ds4-bench: synthetic %s%s, layers %s of %d, %llu bytes (%.2f GiB) built in memory in %.2f s\n",
                     a.preset->name.c_str(), truncated.c_str(), layers_spelling(a.layers_spec, a.preset->n_layer).c_str(), a.preset->n_layer,
                     static_cast<unsigned long long>(memory_model->bytes()),
                     static_cast<double>(memory_model->bytes()) / kGiB, secs);
        path = memory_model->path();
    }
    // --layers against the file's block count is a usage error, found from
    // the header before anything is loaded; without --layers the engine
    // loads every block, so a file without block_count fails in the loader
    // with the loader's sentence.
    if (a.layers_spec) {
        const auto header = ds4::GgufFile::open(path);
        blocks_to_run(a.layers_spec,
                      static_cast<int>(header->get_uint(header->architecture() + ".block_count").value_or(0)));
    }
    ds4::EngineOptions eo;
    eo.model = path;
    eo.backend.name = a.backend;
    eo.backend.threads = a.threads;
    eo.backend.host_weights = a.cuda_host_weights;
    eo.backend.int8_activations = a.int8_activations;
    eo.backend.exact = a.exact;
    eo.layers = a.layers_spec.value_or(ds4::LayerRange::all());
    eo.check_tensors = a.check_tensors;
    eo.chat = false;
    eo.ssd_streaming = a.ssd;
    const std::unique_ptr<ds4::Engine> engine = ds4::Engine::open(eo);
    const int n_layer = engine->info().n_layer;
    const ds4::LayerRange run = engine->info().layers;
    const std::string layers = layers_spelling(a.layers_spec, n_layer);

    const std::vector<int64_t> frontiers = ds4::bench_frontiers(a.walk);
    const bool parallel = a.walk.parallel > 1;
    std::fprintf(stderr, "ds4-bench: %s, %zu frontier(s) %lld..%lld, %lld-token probes, %d sequence%s, seed %llu%s%s\n",
                 engine->backend_description().c_str(), frontiers.size(), static_cast<long long>(frontiers.front()),
                 static_cast<long long>(frontiers.back()), static_cast<long long>(a.walk.gen_tokens), a.walk.parallel,
                 parallel ? "s per batch" : "", static_cast<unsigned long long>(a.walk.seed),
                 a.walk.op_by_op ? ", decode op by op" : "", a.walk.host_argmax ? ", argmax on the host" : "");
    std::fprintf(out, parallel ? "ctx,prefill_tps,gen_tps,kv_bytes,parallel,gen_tps_per_seq\n" : "ctx,prefill_tps,gen_tps,kv_bytes\n");
    std::fflush(out);
    const auto rows = ds4::run_bench_walk(*engine, a.walk, [&](const ds4::BenchRow& r) {
        std::fprintf(out, "%lld,%.3f,%.3f,%llu", static_cast<long long>(r.ctx), r.prefill_tps, r.gen_tps,
                     static_cast<unsigned long long>(r.kv_bytes));
        if (parallel) std::fprintf(out, ",%d,%.3f", r.parallel, r.gen_tps_per_seq);
        std::fprintf(out, "\n");
        std::fflush(out);
        std::fprintf(stderr, "  ctx %8lld: prefill %10.2f t/s, generation %8.2f t/s", static_cast<long long>(r.ctx),
                     r.prefill_tps, r.gen_tps);
        if (parallel) std::fprintf(stderr, " (%d sequences, %.2f t/s each)", r.parallel, r.gen_tps_per_seq);
        std::fprintf(stderr, ", state %8.2f MiB, %lld decode steps replayed\n", static_cast<double>(r.kv_bytes) / (1 << 20),
                     static_cast<long long>(r.steps_replayed));
        if (a.ssd.enabled && r.gen_tps > 0) {
            // The probe's own I/O: what decode read per token, and the
            // rate that alone allows at the read rate measured meanwhile.
            const double tokens = double(r.gen_tps_per_seq > 0 ? a.walk.gen_tokens : 0);
            const double per_token = tokens > 0 ? double(r.gen_bytes_read) / tokens : 0;
            const double gbps = r.gen_read_seconds > 0 ? double(r.gen_bytes_read) / r.gen_read_seconds : 0;
            std::fprintf(stderr,
                         "  decode experts: %llu lookups, %llu misses (%llu from the host tier), %.1f MiB read per "
                         "token at %.2f GB/s: I/O bound %.2f t/s, reads in flight %.0f%% of decode, waiting on them "
                         "%.0f%%\n",
                         static_cast<unsigned long long>(r.gen_lookups), static_cast<unsigned long long>(r.gen_misses),
                         static_cast<unsigned long long>(r.gen_host_hits), per_token / double(1 << 20), gbps / 1e9,
                         per_token > 0 && gbps > 0 ? gbps / per_token : 0.0,
                         100.0 * r.gen_read_seconds * r.gen_tps / std::max(1.0, double(a.walk.parallel * a.walk.gen_tokens)),
                         100.0 * r.gen_stall_seconds * r.gen_tps / std::max(1.0, double(a.walk.parallel * a.walk.gen_tokens)));
        }
    });
    std::fprintf(stderr, "ds4-bench: %zu rows written to %s\n", rows.size(), a.csv.empty() ? "stdout" : a.csv.c_str());
    const std::string expert_stats = engine->expert_source_stats();
    if (!expert_stats.empty()) std::fprintf(stderr, "ds4-bench: %s\n", expert_stats.c_str());
    const ds4::DecodeWeightBytes traffic = ds4::decode_weight_bytes(engine->file(), run.begin, run.end);
    std::fprintf(stderr,
                 "weights per decoded token: %.0f bytes (%.3f GiB), layers %s: routed experts %.3f GiB (expected "
                 "share), other layer weights %.3f GiB, output head %.3f GiB, embedding row %llu bytes\n",
                 traffic.total, traffic.total / kGiB, layers.c_str(), traffic.routed_experts / kGiB,
                 static_cast<double>(traffic.layers_other) / kGiB, static_cast<double>(traffic.output_head) / kGiB,
                 static_cast<unsigned long long>(traffic.embedding_row));
    if (csv_file && std::fclose(csv_file.release()) != 0) throw ds4::Error("could not finish writing '" + a.csv + "'.");
    if (!a.json.empty()) {
        nlohmann::json j;
        j["model"] = a.preset ? a.preset->name : a.model;
        j["synthetic"] = a.preset.has_value();
        if (a.preset && a.preset->truncate_to) j["synthetic_n_layer"] = a.preset->truncate_to;
        j["backend"] = engine->backend().name();
        j["layers"] = layers;
        j["n_layer"] = n_layer;
        j["weights_bytes_per_token"] = traffic.total;
        j["parallel"] = a.walk.parallel;
        j["op_by_op"] = a.walk.op_by_op;
        j["host_argmax"] = a.walk.host_argmax;
        // Which products made the numbers: CUDA prefill in FP32 (--exact) or
        // on f16 tensor cores, decode on float or 8-bit activations. The CPU
        // is exact either way.
        const bool cuda = engine->backend().name() == "cuda";
        j["prefill_products"] = !cuda ? "cpu" : a.exact ? "fp32" : "f16";
        j["int8_activations"] = cuda && a.int8_activations;
        j["ssd_streaming"] = a.ssd.enabled;
        j["experts"] = engine->expert_source_description();
        if (!expert_stats.empty()) {
            j["expert_stats"] = expert_stats;
            const ds4::ExpertSourceStats es = engine->expert_stats();
            j["expert_cache"] = {{"lookups", es.lookups},
                                 {"hits", es.hits},
                                 {"misses", es.misses},
                                 {"host_hits", es.host_hits},
                                 {"evictions", es.evictions},
                                 {"scratch_loads", es.scratch_loads},
                                 {"full_layer_reads", es.full_layer_reads},
                                 {"miss_reads", es.miss_reads},
                                 {"bytes_read", es.bytes_read},
                                 {"read_seconds", es.read_seconds},
                                 {"stall_seconds", es.stall_seconds},
                                 {"background_loads", es.background_loads},
                                 {"lookahead_reads", es.lookahead_reads},
                                 {"lookahead_hits", es.lookahead_hits},
                                 {"promotions", es.promotions},
                                 {"read_gb_per_s", es.read_seconds > 0 ? double(es.bytes_read) / es.read_seconds / 1e9 : 0.0}};
        }
        j["rows"] = nlohmann::json::array();
        for (const auto& r : rows)
            j["rows"].push_back({{"ctx", r.ctx},
                                 {"prefill_tps", r.prefill_tps},
                                 {"gen_tps", r.gen_tps},
                                 {"gen_tps_per_seq", r.gen_tps_per_seq},
                                 {"gen_expert_bytes_read", r.gen_bytes_read},
                                 {"gen_expert_read_seconds", r.gen_read_seconds},
                                 {"gen_expert_stall_seconds", r.gen_stall_seconds},
                                 {"gen_expert_lookups", r.gen_lookups},
                                 {"gen_expert_misses", r.gen_misses},
                                 {"gen_expert_host_hits", r.gen_host_hits},
                                 {"kv_bytes", r.kv_bytes}});
        json_file << j.dump(2) << "\n";
        json_file.close();
        if (!json_file) throw ds4::Error("could not write '" + a.json + "'.");
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    BenchArgs args;
    try {
        args = parse_args(argc, argv);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "ds4-bench: %s\n", e.what());
        return 2;
    }
    if (args.help) {
        std::fputs(kHelp, stdout);
        return 0;
    }
    if (args.version) {
        std::printf("ds4-bench %s\n", DS4_VERSION);
        return 0;
    }
    try {
        return run_bench(args);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "ds4-bench: %s\n", e.what());
        return 2;
    } catch (const ds4::Error& e) {
        std::fprintf(stderr, "ds4-bench: %s\n", e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "ds4-bench: out of memory.\n");
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ds4-bench: internal error: %s\n", e.what());
        return 1;
    }
}

#include "cli/ds4_options.h"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <map>
#include <thread>
#include <vector>

#include "chat/chat.h"
#include "common/error.h"
#include "common/loopback.h"

namespace ds4 {

namespace {

// Raw values as typed. Numbers are parsed by cli_values so every message is
// ours (CLI11's conversion errors are multi-part and name types, not ranges).
struct RawArgs {
    std::string model, prompt, prompt_file, n_predict, ctx, threads, prefill_chunk;
    std::string temp, top_p, top_k, min_p, seed, system, token_ids, dump_logits;
    std::string backend, chat_template;
    PipelineRawFlags pipeline;
    SsdRawFlags ssd;
    int think = 0, think_max = 0, nothink = 0, cuda_host_weights = 0, int8_activations = 0, exact = 0, check_tensors = 0;
};

// How to describe a missing value of each option, by CLI11's option name.
const std::map<std::string, std::string>& value_names() {
    static const std::map<std::string, std::string> m = {
        {"--listen", "HOST and PORT"}, {"--coordinator", "HOST and PORT"}};
    return m;
}

// Turns CLI11's ArgumentMismatch ("--temp: 1 required TEXT missing",
// "--temp: At Most 1 required but received 2") into our wording.
std::string translate_mismatch(const std::string& what) {
    size_t colon = what.find(": ");
    if (colon == std::string::npos || what.rfind("-", 0) != 0) return one_line(what);
    std::string flag = what.substr(0, colon);
    std::string rest = what.substr(colon + 2);
    auto vn = value_names().find(flag);
    bool pair = vn != value_names().end();
    if (rest.find("missing") != std::string::npos || rest.find("At least") != std::string::npos)
        return flag + " needs " + (pair ? vn->second : std::string("a value"));
    if (rest.find("At Most") != std::string::npos)
        return pair ? flag + " takes exactly HOST PORT, once" : flag + " was given more than once";
    return one_line(what);
}

// CLI11 only knows single-letter short options; "-sys" is DwarfStar 4's
// spelling of --system, so it is rewritten before parsing.
std::vector<std::string> normalize_argv(int argc, const char* const* argv) {
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i] ? argv[i] : "";
        if (a == "-sys")
            a = "--system";
        else if (a.rfind("-sys=", 0) == 0)
            a = "--system=" + a.substr(5);
        args.push_back(std::move(a));
    }
    return args;
}

// Options that take values, by every spelling: name shown in messages and
// number of values.
struct ValueOption {
    const char* spellings;  // comma separated, as given to CLI11
    int arity;
};
constexpr ValueOption kValueOptions[] = {
    {"-m,--model", 1}, {"-p,--prompt", 1}, {"--prompt-file", 1}, {"-n,--tokens,--n-predict", 1},
    {"-c,--ctx", 1}, {"-t,--threads", 1}, {"--prefill-chunk", 1}, {"--temp", 1}, {"--top-p", 1},
    {"--top-k", 1}, {"--min-p", 1}, {"--seed", 1}, {"--system", 1}, {"--token-ids", 1},
    {"--dump-logits", 1}, {"--backend", 1}, {"--layers", 1}, {"--role", 1}, {"--listen", 2},
    {"--coordinator", 2}, {"--ssd-streaming-cache-experts", 1}, {"--ssd-streaming-host-cache", 1}, {"--ssd-streaming-prefill", 1},
    {"--ssd-streaming-io", 1}, {"--ssd-streaming-overlap", 1}, {"--ssd-streaming-lookahead", 1}, {"--ssd-streaming-profile", 1}, {"--ssd-streaming-preload-experts", 1},
    {"--ssd-streaming-pack", 1}, {"--ssd-streaming-trace-out", 1}, {"--ssd-streaming-windows", 1}, {"--simulate-used-memory", 1}, {"--chat-template", 1},
    {"--cluster-key-file", 1}, {"--dist-activation-bits", 1}, {"--dist-prefill-chunk", 1},
};
constexpr const char* kFlagOptions[] = {"--think",           "--think-max", "--nothink", "--ssd-streaming",
                                        "--cuda-host-weights", "--int8-activations", "--exact", "--check-tensors", "--debug", "-h", "--help", "--version"};

std::vector<std::string> split_spellings(const char* s) {
    std::vector<std::string> out;
    std::string cur;
    for (const char* c = s;; ++c) {
        if (*c == ',' || *c == 0) {
            out.push_back(cur);
            cur.clear();
            if (*c == 0) break;
        } else {
            cur += *c;
        }
    }
    return out;
}

// The name messages use: the first long spelling ("--tokens" for -n).
std::string display_name(const std::vector<std::string>& spellings) {
    for (const auto& s : spellings)
        if (s.rfind("--", 0) == 0) return s;
    return spellings.front();
}

// True when `a` spells a known option (with or without "=value").
bool is_known_option(const std::string& a) {
    std::string name = a.substr(0, a.find('='));
    for (const auto& o : kValueOptions)
        for (const auto& sp : split_spellings(o.spellings))
            if (name == sp) return true;
    for (const char* f : kFlagOptions)
        if (name == f) return true;
    return false;
}

// CLI11 lets "--temp --prompt x" pass in odd ways (the next option is either
// swallowed as the value or the value goes missing silently), so a value
// option followed by the end of the line or by another known option is
// reported here, before CLI11 sees it.
void check_values_present(const std::vector<std::string>& args) {
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--") break;
        for (const auto& o : kValueOptions) {
            std::vector<std::string> sp = split_spellings(o.spellings);
            if (std::find(sp.begin(), sp.end(), args[i]) == sp.end()) continue;
            for (int k = 1; k <= o.arity; ++k) {
                if (i + k >= args.size() || is_known_option(args[i + k]))
                    throw UsageError(display_name(sp) + " needs " + (o.arity == 2 ? "HOST and PORT" : "a value"));
            }
        }
    }
}

void require_readable_file(const std::string& flag, const std::string& what, const std::string& path) {
    if (path.empty()) throw UsageError(flag + " needs a file name, got ''");
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        throw UsageError(flag + ": " + what + " '" + path + "' " +
                         (errno == ENOENT ? std::string("does not exist") : std::string("cannot be opened (") + std::strerror(errno) + ")"));
    if (S_ISDIR(st.st_mode)) throw UsageError(flag + ": " + what + " '" + path + "' is a directory, not a file");
    if (!S_ISREG(st.st_mode)) throw UsageError(flag + ": " + what + " '" + path + "' is not a regular file");
    if (::access(path.c_str(), R_OK) != 0)
        throw UsageError(flag + ": " + what + " '" + path + "' is not readable (" + std::strerror(errno) + ")");
}

void require_writable_dir_of(const std::string& flag, const std::string& path) {
    if (path.empty()) throw UsageError(flag + " needs a file name, got ''");
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (parent.empty()) parent = ".";
    std::error_code ec;
    if (!std::filesystem::is_directory(parent, ec))
        throw UsageError(flag + ": directory '" + parent.string() + "' does not exist");
    if (std::filesystem::is_directory(path, ec))
        throw UsageError(flag + ": '" + path + "' is a directory, not a file");
}

int default_threads() {
    unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(std::min<unsigned>(n, kMaxThreads));
}

float parse_probability(const std::string& flag, const std::string& text, bool open_at_zero) {
    double v = parse_float_value(flag, text);
    if (open_at_zero ? (v <= 0 || v > 1) : (v < 0 || v > 1))
        throw UsageError(flag + " must be in " + (open_at_zero ? "(0, 1]" : "[0, 1]") + ", got " + text);
    return static_cast<float>(v);
}


// Checks that need several options at once.
void check_combinations(const Ds4Options& o, const RawArgs& raw, const CLI::App& app) {
    auto given = [&](const char* name) { return app.count(name) > 0; };
    if (given("--prompt") && given("--prompt-file"))
        throw UsageError("-p/--prompt and --prompt-file cannot be used together");
    if (given("--token-ids") && (given("--prompt") || given("--prompt-file")))
        throw UsageError("--token-ids cannot be combined with -p/--prompt or --prompt-file");
    if (given("--dump-logits") && !given("--token-ids"))
        throw UsageError("--dump-logits needs --token-ids (the tokens whose logits are dumped)");
    if (given("--token-ids") && !given("--dump-logits"))
        throw UsageError("--token-ids needs --dump-logits (where the logits go)");
    if (given("--chat-template") && given("--token-ids"))
        throw UsageError("--chat-template cannot be combined with --token-ids (raw token ids use no template)");
    if (raw.think > 0 && raw.nothink > 0) throw UsageError("--think and --nothink cannot be used together");
    if (raw.think_max > 0 && raw.nothink > 0) throw UsageError("--think-max and --nothink cannot be used together");
    check_pipeline_flags(o, given, {"coordinator", "worker"});
    if (o.role == "worker")
        for (const char* f : {"--prompt", "--prompt-file", "--token-ids"})
            if (given(f)) throw UsageError(std::string(f) + " is the coordinator's; a worker gets its work from it");
    if (o.cuda_host_weights && o.backend != "cuda") throw UsageError("--cuda-host-weights needs --backend cuda");
    if (o.int8_activations && o.backend == "cpu") throw UsageError("--int8-activations is a CUDA mode; the CPU backend is always exact");
    if (o.int8_activations && o.exact) throw UsageError("--exact and --int8-activations contradict each other");
}

}  // namespace

Ds4Options parse_ds4_options(int argc, const char* const* argv) {
    Ds4Options o;
    o.threads = default_threads();
    std::vector<std::string> args = normalize_argv(argc, argv);

    // --help and --version answer whatever else is on the line (as most
    // tools do), so a user can ask for help while fixing a bad command.
    for (const std::string& a : args) {
        if (a == "--") break;
        if (a == "-h" || a == "--help") o.help = true;
        if (a == "--version") o.version = true;
    }
    if (o.help || o.version) return o;

    check_values_present(args);

    RawArgs raw;
    CLI::App app{"ds4"};
    app.set_help_flag();
    app.allow_extras(true);  // reported below, first one first, in our words
    app.add_option("-m,--model", raw.model);
    app.add_option("-p,--prompt", raw.prompt);
    app.add_option("--prompt-file", raw.prompt_file);
    app.add_option("-n,--tokens,--n-predict", raw.n_predict);
    app.add_option("-c,--ctx", raw.ctx);
    app.add_option("-t,--threads", raw.threads);
    app.add_option("--prefill-chunk", raw.prefill_chunk);
    app.add_option("--temp", raw.temp);
    app.add_option("--top-p", raw.top_p);
    app.add_option("--top-k", raw.top_k);
    app.add_option("--min-p", raw.min_p);
    app.add_option("--seed", raw.seed);
    app.add_flag("--think", raw.think);
    app.add_flag("--think-max", raw.think_max);
    app.add_flag("--nothink", raw.nothink);
    app.add_option("--system", raw.system);
    app.add_option("--chat-template", raw.chat_template);
    app.add_option("--token-ids", raw.token_ids);
    app.add_option("--dump-logits", raw.dump_logits);
    app.add_option("--backend", raw.backend);
    app.add_flag("--cuda-host-weights", raw.cuda_host_weights);
    app.add_flag("--int8-activations", raw.int8_activations);
    app.add_flag("--exact", raw.exact);
    app.add_flag("--check-tensors", raw.check_tensors);
    add_pipeline_flags(app, raw.pipeline);
    add_ssd_flags(app, raw.ssd);

    // CLI11 wants argv order reversed in a vector.
    std::vector<std::string> rev(args.rbegin(), args.rend());
    try {
        app.parse(rev);
    } catch (const CLI::ArgumentMismatch& e) {
        throw UsageError(translate_mismatch(e.what()));
    } catch (const CLI::ParseError& e) {
        throw UsageError(one_line(e.what()));
    }
    std::vector<std::string> extras = app.remaining();
    if (!extras.empty()) {
        const std::string& x = extras.front();
        if (x.size() > 1 && x[0] == '-' && x != "--")
            throw UsageError("unknown option " + quote_value(x) + " (see --help)");
        throw UsageError("unexpected argument " + quote_value(x) + " (options take the form --name VALUE; see --help)");
    }
    auto given = [&](const char* name) { return app.count(name) > 0; };

    // One value at a time, in the order of the help text.
    if (given("--model")) o.model = raw.model;
    if (given("--backend")) o.backend = parse_backend_value("--backend", raw.backend);
    if (given("--threads")) o.threads = static_cast<int>(parse_int_value("--threads", raw.threads, 1, kMaxThreads));
    if (given("--ctx")) o.ctx = static_cast<int>(parse_int_value("--ctx", raw.ctx, 1, kMaxContext));
    if (given("--prefill-chunk"))
        o.prefill_chunk = static_cast<int>(parse_int_value("--prefill-chunk", raw.prefill_chunk, 1, kMaxContext));
    if (given("--prompt")) {
        o.prompt = raw.prompt;
        o.has_prompt = true;
    }
    if (given("--prompt-file")) o.prompt_file = raw.prompt_file;
    if (given("--system")) o.system = raw.system;
    if (raw.nothink > 0) o.think = false;
    if (raw.think_max > 0) o.think_max = true;
    if (given("--chat-template")) o.chat_template = parse_chat_template_value("--chat-template", raw.chat_template);
    if (given("--token-ids")) o.token_ids_file = raw.token_ids;
    if (given("--dump-logits")) o.dump_logits_file = raw.dump_logits;
    if (given("--tokens")) o.n_predict = static_cast<int>(parse_int_value("-n/--tokens", raw.n_predict, -1, kMaxContext));
    if (given("--temp")) {
        double t = parse_float_value("--temp", raw.temp);
        if (t < 0) throw UsageError("--temp must be >= 0, got " + raw.temp);
        if (t > 100) throw UsageError("--temp must be at most 100, got " + raw.temp);
        o.temp = static_cast<float>(t);
    }
    if (given("--top-p")) o.top_p = parse_probability("--top-p", raw.top_p, /*open_at_zero=*/true);
    if (given("--min-p")) o.min_p = parse_probability("--min-p", raw.min_p, /*open_at_zero=*/false);
    if (given("--top-k")) o.top_k = static_cast<int>(parse_int_value("--top-k", raw.top_k, 0, INT32_MAX));
    if (given("--seed")) o.seed = parse_u64_value("--seed", raw.seed);
    parse_pipeline_values(raw.pipeline, given, o);
    parse_ssd_values(raw.ssd, given, o.ssd);
    o.cuda_host_weights = raw.cuda_host_weights > 0;
    o.int8_activations = raw.int8_activations > 0;
    o.exact = raw.exact > 0;
    o.check_tensors = raw.check_tensors > 0;

    check_combinations(o, raw, app);

    // Files last: a typo in a flag is reported before a missing file.
    require_readable_file("-m/--model", "model file", o.model);
    if (!o.prompt_file.empty() || given("--prompt-file"))
        require_readable_file("--prompt-file", "prompt file", o.prompt_file);
    if (given("--token-ids")) require_readable_file("--token-ids", "token id file", o.token_ids_file);
    if (given("--dump-logits")) require_writable_dir_of("--dump-logits", o.dump_logits_file);
    if (given("--cluster-key-file")) require_readable_file("--cluster-key-file", "cluster key file", o.cluster_key_file);
    return o;
}

std::string ds4_help_text() {
    return R"(usage: ds4 [options]

Runs a Mixture-of-Experts model from a GGUF file: one prompt (-p, --prompt-file),
a logits dump (--token-ids with --dump-logits), or an interactive chat (neither).

Model and execution:
  -m, --model FILE          GGUF model file (default: ./ds4flash.gguf)
      --backend NAME        auto, cpu or cuda (default: auto, CUDA when the build
                            has it and a GPU is present, else the CPU)
      --cuda-host-weights   CUDA reads the weights from page-locked host memory
                            (the mapped file, registered) instead of copying them
                            to the GPU: for models larger than GPU memory
      --int8-activations    CUDA decode rounds activations to 8 bits per block of
                            32 and multiplies with integer dot products, as
                            llama.cpp's CUDA backend does: faster, less exact
                            (default: float activations, the CPU's results)
      --exact               CUDA prefill in FP32 (weights decoded to float), the
                            CPU's results to float rounding (default: f16 tensor
                            cores, f32 sums)
  -t, --threads N           CPU threads, >= 1 (default: all hardware threads)
  -c, --ctx N               context length in tokens, 1..16777216 (default: 4096)
      --prefill-chunk N     prompt tokens per forward pass, >= 1 (default: 4096)
      --check-tensors       read every weight before running and stop at the first
                            NaN or infinity (reads the whole file: slow for big models)

Input:
  -p, --prompt TEXT         user message; the chat template is applied
      --prompt-file FILE    read the user message from FILE (not with -p)
  -sys, --system TEXT       system message
      --think               let the model think before answering (default)
      --think-max           think with maximum reasoning effort (DeepSeek V4)
      --nothink             answer without a thinking block
      --chat-template NAME  render the chat with NAME, not the template the
                            model file names: qwen3, qwen3-instruct-2507,
                            qwen3-thinking-2507, deepseek4, deepseek4-flash-0731,
                            glm-4.6, glm-4.7, or raw (the text as is; the default for a model
                            without a chat template, e.g. a base model)
      --token-ids FILE      raw token ids (whitespace separated), no template;
                            needs --dump-logits
      --dump-logits OUT     write the logits of every position of --token-ids

Generation and sampling:
  -n, --tokens N            tokens to generate; -1 = until the end of the
                            answer or a full context (default: -1; alias --n-predict)
      --temp T              temperature, >= 0; 0 = greedy (default: 0.6)
      --top-p P             nucleus sampling, in (0, 1]; 1 = off (default: 0.95)
      --top-k K             keep the K most likely tokens, >= 0; 0 = off (default: 40)
      --min-p P             drop tokens below P x the top probability, in [0, 1] (default: 0)
      --seed N              random seed (default: a fresh one each run)

Pipeline across machines (layer slices):
)" + pipeline_help_text(/*with_worker=*/true) + R"(
SSD streaming of routed experts:
)" + ssd_help_text() + R"(
  -h, --help                print this help and exit
      --version             print the version and exit

Exit status: 0 on success, 1 when a file or the run fails, 2 for a bad command line.
)";
}

}  // namespace ds4

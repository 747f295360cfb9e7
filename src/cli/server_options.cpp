#include "cli/server_options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "chat/chat.h"
#include "cli/cli_values.h"
#include "common/error.h"

namespace ds4 {

namespace {

// An API key: printable ASCII without spaces (what a header carries).
void check_key(const std::string& where, const std::string& k) {
    if (k.empty()) throw UsageError(where + " holds an empty API key");
    for (unsigned char c : k)
        if (c <= 0x20 || c >= 0x7f) throw UsageError(where + " holds an API key with a space or non-ASCII character");
}

// A browser origin for --cors: "*", or scheme://host[:port] exactly as a
// browser sends it in Origin (lowercase, no path: "https://a.example/"
// would never match, so it is refused rather than silently useless).
std::string check_origin(const std::string& o) {
    if (o == "*") return o;
    std::string low;
    for (unsigned char c : o) low += static_cast<char>(std::tolower(c));
    const size_t sep = low.find("://");
    const auto bad = [&](const std::string& why) {
        return UsageError("--cors: " + quote_value(o) + " " + why + "; an origin is scheme://host[:port], e.g. https://app.example.com");
    };
    if (sep == std::string::npos || sep == 0 || !std::isalpha(static_cast<unsigned char>(low[0])))
        throw bad("is not an origin");
    for (size_t i = 0; i < sep; ++i)
        if (!std::isalnum(static_cast<unsigned char>(low[i])) && low[i] != '+' && low[i] != '-' && low[i] != '.')
            throw bad("has a malformed scheme");
    const std::string rest = low.substr(sep + 3);
    if (rest.empty()) throw bad("has no host");
    for (unsigned char c : rest) {
        if (c == '/' || c == '?' || c == '#') throw bad("has a path");
        if (c <= 0x20 || c >= 0x7f || c == ',' || c == '*') throw bad("holds a character an origin cannot");
    }
    if (const size_t colon = rest.rfind(':'); colon != std::string::npos && rest.back() != ']') {
        const std::string port = rest.substr(colon + 1);
        if (colon == 0 || port.empty() || port.find_first_not_of("0123456789") != std::string::npos)
            throw bad("has a malformed port");
    }
    return low;
}

// A file the server reads at start (TLS): refused now, before the model
// loads, rather than after minutes of loading.
void check_readable(const char* flag, const std::string& path) {
    std::error_code ec;
    std::ifstream in(path);
    if (path.empty() || !std::filesystem::is_regular_file(path, ec) || !in)
        throw UsageError(std::string(flag) + ": cannot read " + quote_value(path));
}

}  // namespace

std::string server_help_text() {
    return R"(usage: ds4-server [options]
  -m, --model FILE         GGUF model (default ./ds4flash.gguf)
  --backend auto|cpu|cuda  compute backend (default auto: CUDA when present)
  -t, --threads N          CPU threads (default: one per core)
  --check-tensors          read every weight once at start, refuse NaN/Inf
  --int8-activations       CUDA decode rounds activations to 8 bits per block of
                           32 and multiplies with integer dot products, as
                           llama.cpp's CUDA backend does: faster, less exact
                           (default: float activations, the CPU's results)
  --exact                  CUDA prefill in FP32 (weights decoded to float), the
                           CPU's results to float rounding (default: f16 tensor
                           cores, f32 sums)
  --chat-template NAME     a renderer ds4 knows, or raw (default: the model's)
  -c, --ctx N              tokens per sequence (default 4096)
  --parallel N             sequences decoded together (default 4)
  --prefill-chunk N        prompt tokens per request per step (default 512)
  -b, --batch-size N       tokens per forward pass: a decode token for each
                           generating request, then prompt chunks in arrival
                           order (default 2048; the earliest prompt always
                           gets its chunk)
  --max-queue N            requests waiting for a slot; more get 429 (default 64)
  --cache-ram-mb N         RAM for prompt snapshots reused by later requests (default 0)
  --kv-disk-dir DIR        also keep prompt snapshots in files under DIR; a restarted
                           server resumes their prefixes instead of evaluating them
  --kv-disk-space-mb N     disk for those files, least recently used go first
                           (default 10240)
  --kv-disk-compression zstd|lz4
                           how the files are compressed (default zstd)
  --host HOST              address to bind (default 127.0.0.1)
  --port N                 port (default 8080)
  --api-key KEY            accept this key (Authorization: Bearer KEY or
                           x-api-key: KEY); repeatable
  --api-key-file FILE      one key per line
  --max-body-mb N          largest request body (default 8); larger: 413
  --alias NAME             the model id clients see (default: the file name)
  --shutdown-timeout S     at SIGINT/SIGTERM: refuse new requests (503), give
                           those in flight up to S seconds to finish, then cancel
                           the rest (default 30; 0: cancel at once; so does a
                           second signal)
  --cors ORIGIN            let web pages from ORIGIN (scheme://host[:port]) call
                           the API from a browser; repeatable; * for any origin
  --ssl-cert-file FILE     serve HTTPS with this PEM certificate (chain) and
  --ssl-key-file FILE      this PEM private key (both or neither)
  -h, --help | --version
)" + ssd_help_text() + pipeline_help_text(/*with_worker=*/false) + R"(
endpoints: GET /health (503 while the model loads and while stopping), GET
/metrics (Prometheus), GET /v1/models, POST /v1/chat/completions, POST
/v1/completions (OpenAI shapes), POST /v1/messages, POST
/v1/messages/count_tokens (Anthropic shapes); "stream": true for Server-Sent
Events
exit status: 0 stopped by SIGINT/SIGTERM, 1 the model or the port failed, 2 bad command line
)";
}

ServerCliOptions parse_server_options(int argc, const char* const* argv) {
    ServerCliOptions o;
    struct {
        std::string model, backend, threads, chat_template, ctx, parallel, prefill_chunk, max_queue, cache_ram_mb,
            batch_size, kv_disk_dir, kv_disk_space_mb, kv_disk_compression, host, port, api_key_file, max_body_mb, alias,
            shutdown_timeout, ssl_cert_file, ssl_key_file;
        std::vector<std::string> api_keys, cors;
        int check_tensors = 0, int8_activations = 0, exact = 0, help = 0, version = 0;
        PipelineRawFlags pipeline;
        SsdRawFlags ssd;
    } raw;
    CLI::App app{"ds4-server"};
    app.set_help_flag();
    app.allow_extras(true);
    app.add_flag("-h,--help", raw.help);
    app.add_flag("--version", raw.version);
    app.add_option("-m,--model", raw.model);
    app.add_option("--backend", raw.backend);
    app.add_option("-t,--threads", raw.threads);
    app.add_flag("--check-tensors", raw.check_tensors);
    app.add_flag("--int8-activations", raw.int8_activations);
    app.add_flag("--exact", raw.exact);
    app.add_option("--chat-template", raw.chat_template);
    app.add_option("-c,--ctx", raw.ctx);
    app.add_option("--parallel", raw.parallel);
    app.add_option("--prefill-chunk", raw.prefill_chunk);
    app.add_option("-b,--batch-size", raw.batch_size);
    app.add_option("--max-queue", raw.max_queue);
    app.add_option("--cache-ram-mb", raw.cache_ram_mb);
    app.add_option("--kv-disk-dir", raw.kv_disk_dir);
    app.add_option("--kv-disk-space-mb", raw.kv_disk_space_mb);
    app.add_option("--kv-disk-compression", raw.kv_disk_compression);
    app.add_option("--host", raw.host);
    app.add_option("--port", raw.port);
    app.add_option("--api-key", raw.api_keys)->take_all();
    app.add_option("--api-key-file", raw.api_key_file);
    app.add_option("--max-body-mb", raw.max_body_mb);
    app.add_option("--alias", raw.alias);
    app.add_option("--shutdown-timeout", raw.shutdown_timeout);
    app.add_option("--cors", raw.cors)->take_all();
    app.add_option("--ssl-cert-file", raw.ssl_cert_file);
    app.add_option("--ssl-key-file", raw.ssl_key_file);
    add_pipeline_flags(app, raw.pipeline);
    add_ssd_flags(app, raw.ssd);
    std::vector<std::string> args;
    for (int i = argc - 1; i > 0; --i) args.emplace_back(argv[i]);
    try {
        app.parse(args);
    } catch (const CLI::ParseError& e) {
        throw UsageError(one_line(e.what()));
    }
    if (const std::vector<std::string> extras = app.remaining(); !extras.empty()) {
        const std::string& x = extras.front();
        throw UsageError((x.size() > 1 && x[0] == '-' ? "unknown option " : "unexpected argument ") + quote_value(x) +
                         " (see --help)");
    }
    o.help = raw.help > 0;
    o.version = raw.version > 0;
    if (o.help || o.version) return o;
    auto given = [&](const char* name) { return app.count(name) > 0; };
    std::error_code ec;
    if (given("--model")) o.model = raw.model;
    if (given("--backend")) o.backend = parse_backend_value("--backend", raw.backend);
    if (given("--threads")) o.threads = int(parse_int_value("--threads", raw.threads, 1, 4096));
    o.check_tensors = raw.check_tensors > 0;
    o.int8_activations = raw.int8_activations > 0;
    // Refused rather than ignored: a user asking for the fast CUDA mode on
    // the CPU would otherwise benchmark something else than they think.
    if (o.int8_activations && o.backend == "cpu")
        throw UsageError("--int8-activations is a CUDA mode; the CPU backend is always exact");
    o.exact = raw.exact > 0;
    if (o.int8_activations && o.exact) throw UsageError("--exact and --int8-activations contradict each other");
    if (given("--chat-template")) o.chat_template = parse_chat_template_value("--chat-template", raw.chat_template);
    if (given("--ctx")) o.ctx = int(parse_int_value("--ctx", raw.ctx, 2, 1 << 24));
    if (given("--parallel")) o.parallel = int(parse_int_value("--parallel", raw.parallel, 1, 4096));
    if (given("--prefill-chunk")) o.prefill_chunk = int(parse_int_value("--prefill-chunk", raw.prefill_chunk, 1, 1 << 24));
    if (given("--batch-size")) o.batch_size = int(parse_int_value("--batch-size", raw.batch_size, 1, 1 << 24));
    if (given("--max-queue")) o.max_queue = int(parse_int_value("--max-queue", raw.max_queue, 0, 1 << 20));
    if (given("--cache-ram-mb")) o.cache_ram_mb = uint64_t(parse_int_value("--cache-ram-mb", raw.cache_ram_mb, 0, int64_t(1) << 30));
    if (given("--kv-disk-dir")) {
        if (raw.kv_disk_dir.empty()) throw UsageError("--kv-disk-dir needs a directory");
        if (std::filesystem::exists(raw.kv_disk_dir, ec) && !std::filesystem::is_directory(raw.kv_disk_dir, ec))
            throw UsageError("--kv-disk-dir: " + quote_value(raw.kv_disk_dir) + " exists and is not a directory");
        o.kv_disk_dir = raw.kv_disk_dir;
    }
    if (given("--kv-disk-space-mb"))
        o.kv_disk_space_mb = uint64_t(parse_int_value("--kv-disk-space-mb", raw.kv_disk_space_mb, 1, int64_t(1) << 40));
    if (given("--kv-disk-compression")) {
        if (raw.kv_disk_compression != "zstd" && raw.kv_disk_compression != "lz4")
            throw UsageError("--kv-disk-compression must be zstd or lz4, got " + quote_value(raw.kv_disk_compression));
        o.kv_disk_compression = raw.kv_disk_compression;
    }
    if ((given("--kv-disk-space-mb") || given("--kv-disk-compression")) && o.kv_disk_dir.empty())
        throw UsageError(std::string(given("--kv-disk-space-mb") ? "--kv-disk-space-mb" : "--kv-disk-compression") +
                         " needs --kv-disk-dir");
    if (given("--host")) {
        if (raw.host.empty()) throw UsageError("--host needs an address");
        o.host = raw.host;
    }
    if (given("--port")) o.port = parse_port_value("--port", raw.port);
    for (const std::string& k : raw.api_keys) {
        check_key("--api-key", k);
        o.api_keys.push_back(k);
    }
    if (given("--api-key-file")) {
        std::ifstream in(raw.api_key_file);
        if (!in) throw UsageError("--api-key-file: cannot read " + quote_value(raw.api_key_file));
        std::string line;
        while (std::getline(in, line)) {
            while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
            if (line.empty() || line[0] == '#') continue;
            check_key("--api-key-file", line);
            o.api_keys.push_back(line);
        }
        if (o.api_keys.empty()) throw UsageError("--api-key-file holds no key");
    }
    if (given("--max-body-mb")) o.max_body_mb = uint64_t(parse_int_value("--max-body-mb", raw.max_body_mb, 1, 4096));
    if (given("--alias")) o.alias = raw.alias;
    if (given("--shutdown-timeout")) {
        o.shutdown_timeout = parse_float_value("--shutdown-timeout", raw.shutdown_timeout);
        if (o.shutdown_timeout < 0 || o.shutdown_timeout > 86400)
            throw UsageError("--shutdown-timeout must be 0 to 86400 seconds, got " + quote_value(raw.shutdown_timeout));
    }
    for (const std::string& origin : raw.cors) o.cors_origins.push_back(check_origin(origin));
    if (o.cors_origins.size() > 1 && std::find(o.cors_origins.begin(), o.cors_origins.end(), "*") != o.cors_origins.end())
        throw UsageError("--cors * already allows every origin; give no other --cors with it");
    if (given("--ssl-cert-file") != given("--ssl-key-file"))
        throw UsageError(std::string(given("--ssl-cert-file") ? "--ssl-cert-file needs --ssl-key-file"
                                                              : "--ssl-key-file needs --ssl-cert-file"));
    if (given("--ssl-cert-file")) {
        check_readable("--ssl-cert-file", raw.ssl_cert_file);
        check_readable("--ssl-key-file", raw.ssl_key_file);
        o.ssl_cert_file = raw.ssl_cert_file;
        o.ssl_key_file = raw.ssl_key_file;
    }
    parse_ssd_values(raw.ssd, given, o.ssd);
    parse_pipeline_values(raw.pipeline, given, o);
    check_pipeline_flags(o, given, {"coordinator"});
    if (given("--cluster-key-file") && !std::filesystem::is_regular_file(o.cluster_key_file, ec))
        throw UsageError("--cluster-key-file: no file at " + quote_value(o.cluster_key_file));
    if (!std::filesystem::is_regular_file(o.model, ec))
        throw UsageError("--model: no model file at " + quote_value(o.model));
    return o;
}

}  // namespace ds4

#include "cli/pipeline_flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <unistd.h>

#include "cli/cli_values.h"
#include "common/error.h"
#include "common/loopback.h"

namespace ds4 {

void add_pipeline_flags(CLI::App& app, PipelineRawFlags& raw) {
    app.add_option("--layers", raw.layers);
    app.add_option("--role", raw.role);
    app.add_option("--listen", raw.listen)->expected(2);
    app.add_option("--coordinator", raw.coordinator)->expected(2);
    app.add_option("--cluster-key-file", raw.cluster_key_file);
    app.add_option("--dist-activation-bits", raw.activation_bits);
    app.add_option("--dist-prefill-chunk", raw.dist_prefill_chunk);
    app.add_option("--dist-prefill-window", raw.dist_prefill_window);
    app.add_flag("--debug", raw.debug);
    app.add_option("--tls-cert", raw.tls_cert);
    app.add_option("--tls-key", raw.tls_key);
    app.add_option("--tls-ca", raw.tls_ca);
}

namespace {
void parse_host_port(const std::string& flag, const std::vector<std::string>& v, std::string& host, int& port) {
    if (v.size() != 2) throw UsageError(flag + " needs HOST and PORT");
    if (v[0].empty()) throw UsageError(flag + " needs a non-empty HOST");
    host = v[0];
    port = parse_port_value(flag, v[1]);
}
}  // namespace

void parse_pipeline_values(const PipelineRawFlags& raw, const FlagGiven& given, PipelineFlags& o) {
    if (given("--layers")) o.layers = parse_layer_range(raw.layers);
    if (given("--role")) {
        if (raw.role != "coordinator" && raw.role != "worker")
            throw UsageError("--role must be coordinator or worker, got " + quote_value(raw.role));
        o.role = raw.role;
    }
    if (given("--listen")) parse_host_port("--listen", raw.listen, o.listen_host, o.listen_port);
    if (given("--coordinator")) parse_host_port("--coordinator", raw.coordinator, o.coordinator_host, o.coordinator_port);
    if (given("--cluster-key-file")) o.cluster_key_file = raw.cluster_key_file;
    o.cluster_key_env = std::getenv("DS4_CLUSTER_KEY") != nullptr;
    if (given("--dist-activation-bits")) {
        const int64_t b = parse_int_value("--dist-activation-bits", raw.activation_bits, INT32_MIN, INT32_MAX);
        if (b != 8 && b != 16 && b != 32)
            throw UsageError("--dist-activation-bits must be 32, 16 or 8, got " + raw.activation_bits);
        o.activation_bits = static_cast<int>(b);
    }
    if (given("--dist-prefill-chunk"))
        o.dist_prefill_chunk = static_cast<int>(parse_int_value("--dist-prefill-chunk", raw.dist_prefill_chunk, 1, 1 << 24));
    if (given("--dist-prefill-window")) {
        // More chunks in flight than stages buys nothing; 64 bounds what a
        // typo could hold in memory (each chunk's activations wait in flight).
        o.dist_prefill_window =
            static_cast<int>(parse_int_value("--dist-prefill-window", raw.dist_prefill_window, 1, kMaxPrefillWindow));
    }
    o.debug = raw.debug > 0;
    if (given("--tls-cert")) o.tls_cert = raw.tls_cert;
    if (given("--tls-key")) o.tls_key = raw.tls_key;
    if (given("--tls-ca")) o.tls_ca = raw.tls_ca;
}

void check_pipeline_flags(const PipelineFlags& o, const FlagGiven& given, const std::vector<std::string>& roles) {
    if (!o.role.empty() && std::find(roles.begin(), roles.end(), o.role) == roles.end())
        throw UsageError("--role " + o.role + " is not for this program (workers run as `ds4 --role worker`)");
    if (o.role.empty()) {
        for (const char* f : {"--layers", "--listen", "--coordinator", "--cluster-key-file", "--dist-activation-bits",
                              "--dist-prefill-chunk", "--dist-prefill-window", "--debug", "--tls-cert", "--tls-key", "--tls-ca"})
            if (given(f)) throw UsageError(std::string(f) + " needs --role coordinator|worker (a pipeline of layer slices)");
        return;
    }
    if (o.role == "coordinator") {
        if (!o.layers) throw UsageError("--role coordinator needs --layers 0:B (the first slice, which embeds the tokens)");
        if (o.layers->begin != 0)
            throw UsageError("--role coordinator needs --layers starting at block 0, got " + o.layers->spelling());
        if (o.layers->end == LayerRange::kThroughLast)
            throw UsageError("--role coordinator with --layers " + o.layers->spelling() +
                             " leaves no block for a worker; give it the first blocks only (e.g. 0:11, or "
                             "0:11,output to apply the head here)");
        if (!given("--listen")) throw UsageError("--role coordinator needs --listen HOST PORT (where workers register)");
        if (given("--coordinator")) throw UsageError("--coordinator is a worker's flag; a coordinator takes --listen");
    } else {
        if (!o.layers) throw UsageError("--role worker needs --layers A:B or A:output (the slice it runs)");
        if (o.layers->begin == 0)
            throw UsageError("--role worker needs --layers after block 0 (the coordinator runs block 0), got " +
                             o.layers->spelling());
        if (o.layers->head == LayerRange::Head::kOwned && o.layers->end != LayerRange::kThroughLast)
            throw UsageError("--role worker takes --layers A:B or A:output, got " + o.layers->spelling() +
                             " (a worker holds the head only with the last block; the head alone is the "
                             "coordinator's: --layers 0:B,output)");
        if (!given("--coordinator")) throw UsageError("--role worker needs --coordinator HOST PORT");
        if (!given("--listen") && !is_loopback_host(o.coordinator_host))
            throw UsageError("--role worker with a coordinator on another host needs --listen HOST PORT "
                             "(where the previous stage reaches this worker)");
        for (const char* f : {"--dist-activation-bits", "--dist-prefill-chunk", "--dist-prefill-window"})
            if (given(f)) throw UsageError(std::string(f) + " is the coordinator's; a worker gets its work from it");
    }
    const int tls = int(given("--tls-cert")) + int(given("--tls-key")) + int(given("--tls-ca"));
    if (tls != 0 && tls != 3)
        throw UsageError("TLS needs --tls-cert, --tls-key and --tls-ca together (this process's certificate and key, "
                         "and the CA its peers' certificates are checked against)");
    for (const auto& [flag, path] : {std::pair<const char*, const std::string*>{"--tls-cert", &o.tls_cert},
                                     {"--tls-key", &o.tls_key}, {"--tls-ca", &o.tls_ca}})
        if (given(flag) && ::access(path->c_str(), R_OK) != 0)
            throw UsageError(std::string(flag) + ": cannot read " + quote_value(*path));
    const bool keyed = given("--cluster-key-file") || o.cluster_key_env;
    for (const std::string* host : {&o.listen_host, &o.coordinator_host})
        if (!host->empty() && !is_loopback_host(*host) && !keyed)
            throw UsageError("pipeline address " + *host + " is not loopback: give a cluster key (--cluster-key-file FILE " +
                             "or DS4_CLUSTER_KEY) so only your machines can join");
}

std::string pipeline_help_text(bool with_worker) {
    std::string s = with_worker ? R"(      --layers A:B          run blocks A through B, both inclusive (no head)
      --layers N:output     run blocks N through the last, plus the output head
      --layers 0:B,output   coordinator: blocks 0..B plus the output head, which
                            it applies to the final hidden state the last
                            worker (--layers A:LAST) returns
      --role ROLE           coordinator: runs the first slice (--layers 0:B or
                            0:B,output) and the prompt, waits for workers to
                            cover the rest; worker: serves a later slice
                            (--layers A:B|A:output)
      --listen HOST PORT    coordinator: where workers register; worker: where
                            the previous stage reaches it (default on loopback:
                            127.0.0.1, a free port)
      --coordinator HOST PORT
                            a worker's coordinator
)"
                                : R"(  --role coordinator       serve as a pipeline's coordinator: run the first
                           slice and route every step through workers
                           (`ds4 --role worker`) that cover the rest
  --layers 0:B[,output]    the coordinator's slice (blocks 0..B; with ,output
                           also the head, and the last worker returns its
                           final hidden state)
  --listen HOST PORT       where workers register
)";
    s += with_worker ? R"(      --cluster-key-file FILE
                            shared secret that authenticates every pipeline call
                            (or DS4_CLUSTER_KEY); required off loopback
      --dist-activation-bits 32|16|8
                            hidden state on the wire: exact f32 (default), f16,
                            or 8-bit with one scale per 64 values
      --dist-prefill-chunk N
                            prompt tokens per step along the route (default:
                            --prefill-chunk)
      --dist-prefill-window N
                            prefill chunks in flight along the route, so each
                            stage works on its own chunk at once (1..64,
                            default 4; 1: one chunk at a time)
      --debug               one telemetry line per hop and step on stderr
      --tls-cert FILE --tls-key FILE --tls-ca FILE
                            TLS on every pipeline connection (PEM; all three)
)"
                     : R"(  --cluster-key-file FILE  pipeline secret (or DS4_CLUSTER_KEY); required off loopback
  --dist-activation-bits 32|16|8   hidden state on the wire (default 32: exact)
  --dist-prefill-chunk N   prompt tokens per request per step along the route
  --dist-prefill-window N  accepted for ds4's flags; this server's scheduler sends
                           one step along the route at a time for now
  --debug                  one telemetry line per hop and step on stderr
  --tls-cert F --tls-key F --tls-ca F   TLS on every pipeline connection
)";
    return s;
}

}  // namespace ds4

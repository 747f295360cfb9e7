// The pipeline's flags, shared by ds4 (coordinator or worker) and ds4-server
// (coordinator only): their values, parsed and checked before any model is
// loaded, each problem one ds4::UsageError naming the flag.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/layer_range.h"

namespace CLI {
class App;
}

namespace ds4 {

// The most prefill chunks in flight (--dist-prefill-window).
inline constexpr int kMaxPrefillWindow = 64;

struct PipelineFlags {
    std::optional<LayerRange> layers;       // --layers (absent: every block)
    std::string role;                       // --role coordinator|worker ("" = single process)
    std::string listen_host;                // --listen HOST PORT
    int listen_port = 0;                    // 0 = not given
    std::string coordinator_host;           // --coordinator HOST PORT
    int coordinator_port = 0;
    std::string cluster_key_file;           // --cluster-key-file (else DS4_CLUSTER_KEY)
    bool cluster_key_env = false;           // DS4_CLUSTER_KEY was set at parse time
    int activation_bits = 32;               // --dist-activation-bits 32|16|8
    int dist_prefill_chunk = 0;             // --dist-prefill-chunk (0: --prefill-chunk)
    int dist_prefill_window = 4;            // --dist-prefill-window: prefill chunks in flight along the route
    bool debug = false;                     // --debug: per-hop telemetry on stderr
    std::string tls_cert, tls_key, tls_ca;  // --tls-cert, --tls-key, --tls-ca (all or none)
};

// The flags as typed, for CLI11.
struct PipelineRawFlags {
    std::string layers, role, cluster_key_file, activation_bits, dist_prefill_chunk, dist_prefill_window, tls_cert, tls_key, tls_ca;
    std::vector<std::string> listen, coordinator;
    int debug = 0;
};

// Registers --layers, --role, --listen, --coordinator, --cluster-key-file,
// --dist-activation-bits, --dist-prefill-chunk, --dist-prefill-window, --debug and --tls-*.
void add_pipeline_flags(CLI::App& app, PipelineRawFlags& raw);

using FlagGiven = std::function<bool(const char*)>;

// Parses the values into `out` (each flag's own checks).
void parse_pipeline_values(const PipelineRawFlags& raw, const FlagGiven& given, PipelineFlags& out);

// What each role needs: a coordinator --layers 0:B or 0:B,output (not the
// last block) and --listen; a worker --layers A:B or A:output after block 0
// (the head apart from the last block is the coordinator's) and
// --coordinator (and --listen
// when the coordinator is not on loopback); pipeline flags without --role
// are refused; an address off loopback needs a cluster key. `roles` lists
// the roles this program takes ("coordinator" alone for ds4-server).
void check_pipeline_flags(const PipelineFlags& o, const FlagGiven& given, const std::vector<std::string>& roles);

// The help lines of these flags.
std::string pipeline_help_text(bool with_worker);

}  // namespace ds4

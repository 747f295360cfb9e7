// Command line of `ds4-server`: parsed and checked before any model is
// loaded; each problem is a ds4::UsageError with one line naming the flag
// (the program prints "ds4-server: <message>" and exits 2).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/pipeline_flags.h"
#include "cli/ssd_flags.h"

namespace ds4 {

// With the pipeline flags (a server may be a pipeline coordinator).
struct ServerCliOptions : PipelineFlags {
    std::string model = "./ds4flash.gguf";  // -m/--model
    std::string backend = "auto";           // --backend auto|cpu|cuda
    int threads = 0;                        // -t/--threads (0: one per core)
    bool check_tensors = false;             // --check-tensors
    bool int8_activations = false;          // --int8-activations (CUDA decode only)
    bool exact = false;                     // --exact (FP32 CUDA prefill)
    std::string chat_template;              // --chat-template NAME
    int ctx = 4096;                         // -c/--ctx: tokens per sequence
    int parallel = 4;                       // --parallel: sequences decoded together
    int prefill_chunk = 512;                // --prefill-chunk
    int batch_size = 2048;                  // -b/--batch-size: tokens per forward pass
    int max_queue = 64;                     // --max-queue
    uint64_t cache_ram_mb = 0;              // --cache-ram-mb: prompt snapshots kept in RAM
    std::string kv_disk_dir;                // --kv-disk-dir: prompt snapshots kept on disk ("" = none)
    uint64_t kv_disk_space_mb = 10240;      // --kv-disk-space-mb
    std::string kv_disk_compression = "zstd";  // --kv-disk-compression zstd|lz4
    std::string host = "127.0.0.1";         // --host
    int port = 8080;                        // --port
    std::vector<std::string> api_keys;      // --api-key (repeatable) and --api-key-file lines
    uint64_t max_body_mb = 8;               // --max-body-mb
    std::string alias;                      // --alias: the model id clients see ("" = the file name)
    double shutdown_timeout = 30;           // --shutdown-timeout: seconds in-flight requests get at SIGTERM
    std::vector<std::string> cors_origins;  // --cors (repeatable; "*" alone: any origin)
    std::string ssl_cert_file, ssl_key_file;  // --ssl-cert-file, --ssl-key-file (both or neither)
    SsdStreaming ssd;                       // --ssd-streaming and its flags
    bool help = false, version = false;
};

ServerCliOptions parse_server_options(int argc, const char* const* argv);
std::string server_help_text();

}  // namespace ds4

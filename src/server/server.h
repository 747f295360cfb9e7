// ds4-server: OpenAI- and Anthropic-compatible HTTP endpoints over the
// engine's scheduler. cpp-httplib parses HTTP and runs a thread per
// connection; every request becomes a scheduler request, and the
// scheduler's own thread runs the batched forward passes. Streaming
// responses are Server-Sent Events fed from the request's text callback; a
// client that goes away cancels its generation at the next step.
//
// The listener starts before the model loads, so GET /health can say
// "loading" (503) until the engine arrives, then 200; other endpoints
// answer 503 until then.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <functional>
#include <string>
#include <vector>

namespace ds4 {

class Engine;

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;
    std::vector<std::string> api_keys;  // empty: no authentication
    uint64_t max_body_bytes = 8u << 20; // larger request bodies: 413
    int parallel = 4;                   // sequence slots
    int64_t n_ctx = 4096;               // per sequence
    int64_t prefill_chunk = 512;
    size_t max_queue = 64;
    uint64_t cache_ram_bytes = 0;       // prefix-cache snapshots in RAM
    std::string kv_disk_dir;            // prefix-cache snapshots on disk too ("" = none)
    uint64_t kv_disk_bytes = 0;
    std::string kv_disk_compression = "zstd";
    std::string model_id;               // what /v1/models lists and responses echo
    // More /metrics series from outside the server (a pipeline
    // coordinator's per-hop telemetry); called on the HTTP threads.
    std::function<std::string()> extra_metrics;
};

class Server {
public:
    explicit Server(const ServerOptions& options);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Binds and listens on a thread of its own (GET /health: 503 loading);
    // throws ds4::Error (one sentence) when the address cannot be bound.
    void start();
    // Serves requests on `engine` until stop(): runs the scheduler's loop
    // on the calling thread and returns once the listener has stopped.
    // Returns at once when stop() came first (a signal during the load).
    void serve(const Engine& engine);
    // From any thread (a signal watcher): stops accepting, cancels what is
    // in flight, and makes serve() return.
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace ds4

// ds4-server: OpenAI- and Anthropic-compatible HTTP endpoints over the
// engine's scheduler. cpp-httplib parses HTTP and runs a thread per
// connection; every request becomes a scheduler request, and the
// scheduler's own thread runs the batched forward passes. Streaming
// responses are Server-Sent Events fed from the request's text callback; a
// client that goes away cancels its generation at the next step (a whole
// reply's client is watched on its socket: client_connection.h).
//
// The listener starts before the model loads, so GET /health can say
// "loading" (503) until the engine arrives, then 200; other endpoints
// answer 503 until then. It speaks HTTPS with a certificate and key
// (httplib's SSLServer), and CORS for browser pages when origins are given
// (cors.h). Stopping drains: see stop().
#pragma once

#include <atomic>
#include <chrono>
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
    int64_t batch_tokens = 2048;  // tokens per forward pass (--batch-size)
    size_t max_queue = 64;
    uint64_t cache_ram_bytes = 0;       // prefix-cache snapshots in RAM
    std::string kv_disk_dir;            // prefix-cache snapshots on disk too ("" = none)
    uint64_t kv_disk_bytes = 0;
    std::string kv_disk_compression = "zstd";
    std::string model_id;               // what /v1/models lists and responses echo
    // At stop(): how long requests in flight may still run before they are
    // cancelled (0: cancelled at once).
    std::chrono::milliseconds shutdown_timeout{30000};
    std::vector<std::string> cors_origins;    // checked origins, or "*" alone; empty: no CORS headers
    std::string ssl_cert_file, ssl_key_file;  // PEM files: HTTPS instead of HTTP
    // More /metrics series from outside the server (a pipeline
    // coordinator's per-hop telemetry); called on the HTTP threads.
    std::function<std::string()> extra_metrics;
};

class Server {
public:
    // Throws ds4::UsageError when the TLS files hold no usable certificate
    // and matching key (a bad command line: nothing is loaded yet).
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
    // From any thread (a signal watcher): new requests get 503, the
    // requests in flight may finish for up to shutdown_timeout, then the
    // rest are cancelled (each ends as its API ends a cancelled
    // generation); once every response is written the listener stops, and
    // serve() returns after the disk KV cache is flushed.
    void stop();
    // As stop(), cancelling what is in flight at once (a second signal).
    void stop_now();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace ds4

// The coordinator's end of a pipeline: it listens for workers, checks each
// registration (cluster key, protocol, same model file, a slice after its
// own, enough context and sequence slots), keeps the route table, and hands
// the engine a Downstream that runs every step along the current route.
// The coordinator is otherwise the normal ds4 CLI or ds4-server.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "engine/downstream.h"
#include "pipeline/cluster_key.h"
#include "pipeline/route.h"
#include "pipeline/transport.h"

namespace grpc {
class Server;
}

namespace ds4 {

class Engine;
class HopStats;

struct CoordinatorConfig {
    std::string listen_host = "127.0.0.1";
    int listen_port = 0;
    std::optional<ClusterKey> key;
    std::shared_ptr<const TlsPems> tls;  // TLS on every connection (none: plaintext)
    int activation_bits = 32;
    int n_slots = 1;         // sequences per step (the server's --parallel)
    int64_t n_ctx = 4096;    // positions per sequence
    bool debug = false;      // one telemetry line per hop and step
    std::shared_ptr<HopStats> hop_stats;  // per-hop sums for /metrics (none: not kept)
    std::chrono::seconds wait_for_workers{300};
};

class Coordinator {
public:
    // Binds HOST:PORT and starts serving registrations. Throws ds4::Error
    // when the address cannot be bound.
    Coordinator(const Engine& engine, CoordinatorConfig config);
    ~Coordinator();
    Coordinator(const Coordinator&) = delete;
    Coordinator& operator=(const Coordinator&) = delete;

    // Blocks until the route covers every block after this process's
    // slice and the head, saying what it waits for; throws ds4::Error with
    // what is still missing after config.wait_for_workers.
    void wait_for_route();
    // The stages after this process, for Engine::set_route.
    std::shared_ptr<Downstream> route() const { return route_; }
    const RouteTable& table() const { return *table_; }
    // The port it listens on (the one given, or the one picked for 0).
    int port() const { return port_; }

private:
    class Registrar;
    CoordinatorConfig config_;
    // What registrations are checked against, copied: a worker's call may
    // arrive while the process exits, after the engine is gone.
    std::string arch_, model_path_, model_id_;
    std::unique_ptr<RouteTable> table_;
    std::unique_ptr<Registrar> registrar_;
    std::unique_ptr<grpc::Server> server_;
    std::shared_ptr<Downstream> route_;
    int port_ = 0;
};

}  // namespace ds4

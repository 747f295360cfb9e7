#include "pipeline_role.h"

#include <atomic>
#include <csignal>

#include "common/error.h"
#include "pipeline/worker.h"

namespace ds4 {

namespace {
std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) { g_stop.store(true); }
}  // namespace

std::optional<ClusterKey> load_cluster_key(const Ds4Options& opts) {
    if (opts.role.empty()) return std::nullopt;
    try {
        return ClusterKey::load(opts.cluster_key_file);
    } catch (const Error& e) {
        throw UsageError(e.what());
    }
}

std::unique_ptr<Coordinator> start_coordinator(Engine& engine, const Ds4Options& opts, std::optional<ClusterKey> key) {
    CoordinatorConfig c;
    c.listen_host = opts.listen_host;
    c.listen_port = opts.listen_port;
    c.key = std::move(key);
    c.activation_bits = opts.activation_bits;
    c.n_slots = 1;
    c.n_ctx = opts.ctx;
    c.debug = opts.debug;
    auto coordinator = std::make_unique<Coordinator>(engine, std::move(c));
    coordinator->wait_for_route();
    engine.set_route(coordinator->route());
    return coordinator;
}

int run_worker_role(const Engine& engine, const Ds4Options& opts, std::optional<ClusterKey> key) {
    WorkerConfig w;
    w.coordinator_host = opts.coordinator_host;
    w.coordinator_port = opts.coordinator_port;
    if (opts.listen_port != 0) {
        w.listen_host = opts.listen_host;
        w.listen_port = opts.listen_port;
    }
    w.key = std::move(key);
    w.max_ctx = opts.ctx;
    w.debug = opts.debug;
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    return run_worker(engine, w, g_stop);
}

}  // namespace ds4

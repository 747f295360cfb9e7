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

std::unique_ptr<Coordinator> start_coordinator(Engine& engine, const Ds4Options& opts, PipelineSecrets secrets) {
    auto coordinator =
        std::make_unique<Coordinator>(engine, coordinator_config(opts, std::move(secrets), /*n_slots=*/1, opts.ctx));
    coordinator->wait_for_route();
    engine.set_route(coordinator->route());
    return coordinator;
}

int run_worker_role(const Engine& engine, const Ds4Options& opts, PipelineSecrets secrets) {
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    return run_worker(engine, worker_config(opts, std::move(secrets), opts.ctx), g_stop);
}

}  // namespace ds4

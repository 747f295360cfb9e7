// ds4 --role coordinator|worker: the command line's side of the pipeline.
#pragma once

#include <memory>
#include <optional>

#include "cli/ds4_options.h"
#include "engine/engine.h"
#include "pipeline/cluster_key.h"
#include "pipeline/coordinator.h"

namespace ds4 {

// The cluster key the options name (file or DS4_CLUSTER_KEY); throws
// ds4::UsageError with its sentence, before any model is loaded.
std::optional<ClusterKey> load_cluster_key(const Ds4Options& opts);

// Listens, waits until workers cover every later block, and routes the
// engine's sessions through them. Keep the result alive while they run.
std::unique_ptr<Coordinator> start_coordinator(Engine& engine, const Ds4Options& opts,
                                               std::optional<ClusterKey> key);

// Serves this worker's slice until SIGINT or SIGTERM (returns 0).
int run_worker_role(const Engine& engine, const Ds4Options& opts, std::optional<ClusterKey> key);

}  // namespace ds4

// ds4 --role coordinator|worker: the command line's side of the pipeline.
#pragma once

#include <memory>
#include <optional>

#include "cli/ds4_options.h"
#include "engine/engine.h"
#include "pipeline/coordinator.h"
#include "pipeline/pipeline_setup.h"

namespace ds4 {

// Listens, waits until workers cover every later block, and routes the
// engine's sessions through them. Keep the result alive while they run.
std::unique_ptr<Coordinator> start_coordinator(Engine& engine, const Ds4Options& opts, PipelineSecrets secrets);

// Serves this worker's slice until SIGINT or SIGTERM (returns 0).
int run_worker_role(const Engine& engine, const Ds4Options& opts, PipelineSecrets secrets);

}  // namespace ds4

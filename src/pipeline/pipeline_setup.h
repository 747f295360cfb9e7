// The pipeline's configuration from the command line, one way for ds4 and
// ds4-server: what a process proves itself with (the cluster key and, when
// asked for, TLS certificates, read before any model is loaded: a problem
// there is a bad command line) and the coordinator's and worker's settings.
#pragma once

#include <memory>
#include <optional>

#include "cli/pipeline_flags.h"
#include "pipeline/cluster_key.h"
#include "pipeline/coordinator.h"
#include "pipeline/transport.h"
#include "pipeline/worker.h"

namespace ds4 {

struct PipelineSecrets {
    std::optional<ClusterKey> key;
    std::shared_ptr<const TlsPems> tls;
};

// Throws ds4::UsageError with the sentence.
PipelineSecrets load_pipeline_secrets(const PipelineFlags& flags);

// A coordinator of n_slots sequences of n_ctx positions, as the flags say.
CoordinatorConfig coordinator_config(const PipelineFlags& flags, PipelineSecrets secrets, int n_slots, int64_t n_ctx);
// A worker accepting up to max_ctx positions per sequence.
WorkerConfig worker_config(const PipelineFlags& flags, PipelineSecrets secrets, int64_t max_ctx);

}  // namespace ds4

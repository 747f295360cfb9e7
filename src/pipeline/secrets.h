// What a pipeline process proves itself with: the cluster key and, when
// asked for, TLS certificates; read from the files the flags name before
// any model is loaded (a problem there is a bad command line).
#pragma once

#include <memory>
#include <optional>

#include "cli/pipeline_flags.h"
#include "pipeline/cluster_key.h"
#include "pipeline/transport.h"

namespace ds4 {

struct PipelineSecrets {
    std::optional<ClusterKey> key;
    std::shared_ptr<const TlsPems> tls;
};

// Throws ds4::UsageError with the sentence.
PipelineSecrets load_pipeline_secrets(const PipelineFlags& flags);

}  // namespace ds4

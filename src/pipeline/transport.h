// gRPC plumbing shared by both ends: channel and server settings (no
// message size limit: a prefill chunk's activations or a long prompt's
// logits run to hundreds of MB; keepalive pings so a peer that vanished
// without closing its connection fails calls within seconds) and the
// cluster-key check of an incoming call.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>

#include "pipeline/cluster_key.h"

namespace ds4 {

inline constexpr unsigned kPipelineProtocol = 1;

// A channel to HOST:PORT (insecure transport; the cluster key
// authenticates every call).
std::shared_ptr<grpc::Channel> pipeline_channel(const std::string& address);
// Settings for a server builder.
void configure_pipeline_server(grpc::ServerBuilder& builder);
// Adds the key's token for `method` to an outgoing call.
void authenticate_call(grpc::ClientContext& ctx, const std::optional<ClusterKey>& key, const char* method);
// OK, or UNAUTHENTICATED with the sentence the caller shows.
grpc::Status check_call(const grpc::ServerContext& ctx, const std::optional<ClusterKey>& key, const char* method);

}  // namespace ds4

#include "pipeline/transport.h"

namespace ds4 {

namespace {
constexpr int kKeepaliveMs = 2000, kKeepaliveTimeoutMs = 3000;
}

std::shared_ptr<grpc::Channel> pipeline_channel(const std::string& address) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveMs);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    // Reconnect quickly after a worker restarts (the default backoff grows to minutes).
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

void configure_pipeline_server(grpc::ServerBuilder& builder) {
    builder.SetMaxReceiveMessageSize(-1);
    builder.SetMaxSendMessageSize(-1);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveMs);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
    // Reuse of a port a killed worker held: restart on the same address at once.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
}

void authenticate_call(grpc::ClientContext& ctx, const std::optional<ClusterKey>& key, const char* method) {
    if (key) ctx.AddMetadata(kClusterAuthHeader, key->token(method));
}

grpc::Status check_call(const grpc::ServerContext& ctx, const std::optional<ClusterKey>& key, const char* method) {
    const auto& md = ctx.client_metadata();
    const auto it = md.find(kClusterAuthHeader);
    if (!key) {
        if (it == md.end()) return grpc::Status::OK;
        return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                            "the call carries a cluster key but this process was started without one.");
    }
    if (it == md.end())
        return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                            "this process needs the cluster key and the call carries none.");
    if (!key->verify(std::string_view(it->second.data(), it->second.size()), method))
        return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                            "the cluster key does not match (or the clocks differ by more than 5 minutes).");
    return grpc::Status::OK;
}

}  // namespace ds4

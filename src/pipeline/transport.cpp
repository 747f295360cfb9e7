#include "pipeline/transport.h"

#include <cstdlib>
#include <cstring>

#include <fstream>
#include <sstream>

#include "common/error.h"

namespace ds4 {

namespace {
constexpr int kKeepaliveMs = 2000, kKeepaliveTimeoutMs = 3000;
}

TlsPems TlsPems::load(const std::string& cert_file, const std::string& key_file, const std::string& ca_file) {
    auto read = [](const std::string& path, const char* what) {
        std::ifstream in(path, std::ios::binary);
        std::ostringstream ss;
        if (!in || !(ss << in.rdbuf())) throw Error("cannot read the TLS " + std::string(what) + " " + path + ".");
        if (ss.str().find("-----BEGIN ") == std::string::npos)
            throw Error("the TLS " + std::string(what) + " " + path + " is not a PEM file.");
        return ss.str();
    };
    return TlsPems{read(cert_file, "certificate"), read(key_file, "key"), read(ca_file, "CA certificate")};
}

std::shared_ptr<grpc::ServerCredentials> pipeline_server_credentials(const TlsPems* tls) {
    if (!tls) return grpc::InsecureServerCredentials();
    grpc::SslServerCredentialsOptions o;
    o.pem_root_certs = tls->ca;
    o.pem_key_cert_pairs.push_back({tls->key, tls->cert});
    return grpc::SslServerCredentials(o);
}

std::shared_ptr<grpc::Channel> pipeline_channel(const std::string& address, const TlsPems* tls) {
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
    if (!tls) return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = tls->ca;
    o.pem_private_key = tls->key;
    o.pem_cert_chain = tls->cert;
    return grpc::CreateCustomChannel(address, grpc::SslCredentials(o), args);
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

bool pipeline_spins() {
    static const bool on = [] {
        const char* v = std::getenv("DS4_PIPELINE_SPIN");
        return v && std::strcmp(v, "1") == 0;
    }();
    return on;
}

grpc::CompletionQueue::NextStatus next_event(grpc::CompletionQueue& cq, bool poll, void** tag, bool* ok) {
    if (poll) return cq.AsyncNext(tag, ok, gpr_time_0(GPR_CLOCK_MONOTONIC));
    return cq.Next(tag, ok) ? grpc::CompletionQueue::GOT_EVENT : grpc::CompletionQueue::SHUTDOWN;
}

}  // namespace ds4

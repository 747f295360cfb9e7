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

// TLS for the pipeline's connections (--tls-cert, --tls-key, --tls-ca): every
// process serves with its certificate and checks its peers' against the CA.
// Without it the transport is plaintext and the cluster key alone
// authenticates calls.
struct TlsPems {
    std::string cert, key, ca;
    // Reads the three PEM files; throws ds4::Error naming one it cannot read.
    static TlsPems load(const std::string& cert_file, const std::string& key_file, const std::string& ca_file);
};

// A channel to HOST:PORT, over TLS when `tls` is given.
std::shared_ptr<grpc::Channel> pipeline_channel(const std::string& address, const TlsPems* tls = nullptr);
// Settings for a server builder.
void configure_pipeline_server(grpc::ServerBuilder& builder);
// The listening port's credentials: TLS with the certificate when given.
std::shared_ptr<grpc::ServerCredentials> pipeline_server_credentials(const TlsPems* tls);
// Adds the key's token for `method` to an outgoing call.
void authenticate_call(grpc::ClientContext& ctx, const std::optional<ClusterKey>& key, const char* method);
// Whether the pipeline's waits poll their completion queues without sleeping
// (DS4_PIPELINE_SPIN=1; read once): a step's answer then costs no thread's
// wake-up, and a core stays busy while the route computes (a worker's
// stream server spins only while steps keep coming). For machines with
// cores to spare, such as GPU stages.
bool pipeline_spins();
// The next event of `cq`: polled (a zero deadline: TIMEOUT when none is
// there yet, the caller asks again) or slept on until one comes (GOT_EVENT,
// or SHUTDOWN once the queue is shut down and drained).
grpc::CompletionQueue::NextStatus next_event(grpc::CompletionQueue& cq, bool poll, void** tag, bool* ok);
// OK, or UNAUTHENTICATED with the sentence the caller shows.
grpc::Status check_call(const grpc::ServerContext& ctx, const std::optional<ClusterKey>& key, const char* method);

}  // namespace ds4

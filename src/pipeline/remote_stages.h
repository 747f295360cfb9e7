// The rest of a pipeline route seen from one process: a Downstream that
// sends each step's hidden rows to the next hop (which forwards them along
// the route itself, worker to worker) and returns the logits that come
// back. The coordinator's sessions use one; so does every worker that is
// not the last.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/downstream.h"
#include "pipeline.grpc.pb.h"
#include "pipeline/cluster_key.h"
#include "pipeline/transport.h"

namespace ds4 {

namespace wire = ds4::pipeline::v1;

// What one step cost along the route: the hops' own records (this process's
// encoding and waiting first, as hop 0 with its address empty).
struct RouteTelemetry {
    uint64_t request_id = 0;
    std::vector<wire::HopTelemetry> hops;
};

class RemoteStages : public Downstream {
public:
    using HopSource = std::function<std::vector<wire::Hop>()>;
    using TelemetrySink = std::function<void(const RouteTelemetry&)>;

    // `hops` gives the route after this process at each step (throws
    // ds4::Error when it is incomplete).
    RemoteStages(HopSource hops, std::optional<ClusterKey> key, std::shared_ptr<const TlsPems> tls,
                 int activation_bits, int64_t n_vocab, TelemetrySink sink = {});

    std::vector<std::vector<float>> forward(std::span<const RouteSeq> seqs, std::span<const float> hidden,
                                            int64_t cols, int n_slots, int64_t n_ctx) override;
    // The hop records of the latest step, after this process's.
    const std::vector<wire::HopTelemetry>& last_hops() const { return last_.hops; }
    double last_send_ms() const { return send_ms_; }
    double last_wait_ms() const { return wait_ms_; }
    uint64_t last_bytes_out() const { return bytes_out_; }

private:
    wire::Stage::Stub& stub(const std::string& address);
    HopSource hops_;
    std::optional<ClusterKey> key_;
    std::shared_ptr<const TlsPems> tls_;
    int bits_;
    int64_t n_vocab_;
    TelemetrySink sink_;
    std::map<std::string, std::unique_ptr<wire::Stage::Stub>> stubs_;
    std::atomic<uint64_t> next_request_{1};
    RouteTelemetry last_;
    double send_ms_ = 0, wait_ms_ = 0;
    uint64_t bytes_out_ = 0;
};

// The sentence for a failed call to the stage at `hop`.
std::string describe_stage_failure(const wire::Hop& hop, const grpc::Status& status);

}  // namespace ds4

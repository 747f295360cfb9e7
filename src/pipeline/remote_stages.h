// The rest of a pipeline route seen from one process: a Downstream that
// sends each step's hidden rows to the next hop (which forwards them along
// the route itself, worker to worker) and returns what comes back: logits,
// or the final hidden rows when the head is the coordinator's. The coordinator's sessions use one; so does every worker that is
// not the last. Calls may overlap (pipelined prefill: submit() returns
// before the route answers; a worker relays several steps at once).
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
#include "pipeline/hop_stream.h"
#include "pipeline/transport.h"

namespace ds4 {

namespace wire = ds4::pipeline::v1;

// What one step cost along the route: the hops' own records (this process's
// encoding and waiting first, as hop 0 with its address empty).
struct RouteTelemetry {
    uint64_t request_id = 0;
    std::vector<wire::HopTelemetry> hops;
};

// A step relayed by a worker: what the rest of the route answered, as it
// came (passed back upstream without decoding), and what relaying cost.
struct Relayed {
    wire::Result result;
    double send_ms = 0, wait_ms = 0;
    uint64_t bytes_out = 0;
};

class RemoteStages : public Downstream {
public:
    using HopSource = std::function<std::vector<wire::Hop>()>;
    // Called on the thread that collects the step's logits.
    using TelemetrySink = std::function<void(const RouteTelemetry&)>;

    // What the route's last hop returns: logits (it applies the head), or
    // its final hidden rows for a coordinator that owns the head.
    struct RouteEnd {
        bool logits = true;
        int64_t cols = 0;  // n_vocab, or the hidden state's width
    };

    // `hops` gives the route after this process at each forward() or
    // submit() (throws ds4::Error when it is incomplete); relay() is given
    // its route instead (and passes back whatever the route returned).
    RemoteStages(HopSource hops, std::optional<ClusterKey> key, std::shared_ptr<const TlsPems> tls,
                 int activation_bits, RouteEnd end, TelemetrySink sink = {});

    std::vector<std::vector<float>> forward(std::span<const RouteSeq> seqs, std::span<const float> hidden,
                                            int64_t cols, int n_slots, int64_t n_ctx,
                                            std::vector<Candidates>* best) override;
    void note_local_eval_ms(double ms) override { local_eval_ms_ = ms; }
    std::unique_ptr<RouteStep> submit(std::span<const RouteSeq> seqs, std::span<const float> hidden, int64_t cols,
                                      int n_slots, int64_t n_ctx, const RouteStep* after) override;
    // Snapshots across the route (route_snapshots.cpp): one call per hop,
    // straight to each worker, outside any step.
    std::vector<RouteStatePart> snapshot_route(int slot, int64_t n_past, uint64_t prefix_hash) override;
    std::string restore_route(int slot, int n_slots, int64_t n_ctx, std::span<const int32_t> tokens,
                              uint64_t prefix_hash, const std::vector<RouteStatePart>& parts) override;
    // A worker passing a step on along `route` (the hops after it, as the
    // step's work names them) under the coordinator's request id and the
    // step it follows; throws like forward(). Safe to call from several
    // threads at once.
    Relayed relay(const std::vector<wire::Hop>& route, std::span<const RouteSeq> seqs, std::span<const float> hidden,
                  int64_t cols, int n_slots, int64_t n_ctx, uint64_t request_id, uint64_t follows);

    // One call's message and what is known before it is sent.
    struct Prepared {
        wire::Work work;
        wire::Hop first;                 // the hop it goes to
        std::string last_address;        // the route's last hop (for the head check's sentence)
        std::vector<int64_t> seq_rows;   // each sequence's rows back (logits or final hidden)
        int64_t rows = 0, out_rows = 0;
        double send_ms = 0, local_eval_ms = 0;
        uint64_t bytes_out = 0;
    };

private:
    Prepared prepare(const std::vector<wire::Hop>& route, std::span<const RouteSeq> seqs, std::span<const float> hidden, int64_t cols, int n_slots,
                     int64_t n_ctx, uint64_t request_id, uint64_t follows);
    // The blocking gRPC call; throws RouteStateLost, StageUnavailable or
    // ds4::Error with the hop's sentence.
    wire::Result exchange(const Prepared& p, double* wait_ms);
    // Checks and splits the logits (and the candidates into *best, one
    // entry per sequence, when given); reports telemetry.
    std::vector<std::vector<float>> finish(const Prepared& p, const wire::Result& result, double wait_ms,
                                           std::vector<Candidates>* best);
    wire::Stage::Stub& stub(const std::string& address);
    HopStream& stream(const std::string& address);
    class Pending;

    HopSource hops_;
    std::optional<ClusterKey> key_;
    std::shared_ptr<const TlsPems> tls_;
    int bits_;
    RouteEnd end_;
    TelemetrySink sink_;
    std::mutex stubs_mu_;
    std::map<std::string, std::unique_ptr<wire::Stage::Stub>> stubs_;
    std::map<std::string, std::unique_ptr<HopStream>> streams_;  // destroyed before the stubs they use
    std::atomic<uint64_t> next_request_;
    std::atomic<double> local_eval_ms_{0};
    std::atomic<bool> snapshot_warned_{false};  // a route that cannot snapshot says so once
};

// The sentence for a failed call to the stage at `hop`.
std::string describe_stage_failure(const wire::Hop& hop, const grpc::Status& status);

}  // namespace ds4

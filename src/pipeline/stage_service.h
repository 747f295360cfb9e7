// A worker's Stage service: runs each step's rows through this process's
// layer slice and on along the route (worker to worker), and answers with
// what came back plus its own telemetry. Before computing, it checks that
// every sequence is where the work says it continues (position and prefix
// hash of its tokens): a worker that restarted or holds another sequence
// answers FAILED_PRECONDITION and the coordinator replays that sequence,
// so no step ever runs at a wrong position. The lock covers this stage's
// own compute only: while one step waits for the rest of the route, the
// next (a pipelined prefill's next chunk) runs here.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <optional>
#include <string>

#include "engine/slot_pool.h"
#include "pipeline.grpc.pb.h"
#include "pipeline/cluster_key.h"
#include "pipeline/remote_stages.h"

namespace ds4 {

class Engine;
namespace wire = ds4::pipeline::v1;

struct StageConfig {
    std::string address;             // where this worker serves (telemetry)
    std::optional<ClusterKey> key;   // required on every call when set
    std::shared_ptr<const TlsPems> tls;  // for the calls to the next hop
    int64_t max_ctx = 0;             // the most positions per sequence (--ctx)
    bool debug = false;              // one line per step on the log
};

// ForwardStream is served asynchronously (stage_streams.cpp): one thread
// runs serve_streams over a completion queue the worker adds to its server,
// and may poll it without sleeping (pipeline_spins()).
class StageService final : public wire::Stage::WithAsyncMethod_ForwardStream<wire::Stage::Service> {
public:
    StageService(const Engine& engine, StageConfig config);
    // Where this worker serves, once bound (messages and telemetry name it).
    void set_address(std::string address);
    grpc::Status Forward(grpc::ServerContext* ctx, const wire::Work* work, wire::Result* result) override;
    // Forward's steps one after another on streams (hop_stream.h), each
    // answered as Forward answers it; an error ends its stream with its
    // status. Returns once `cq` is shut down and drained; call
    // stop_streams() before the server's Shutdown.
    void serve_streams(grpc::ServerCompletionQueue& cq);
    void stop_streams() { streams_stopping_ = true; }
    // A sequence's state here, for the coordinator's snapshot of the whole
    // route, and back (stage_snapshots.cpp).
    grpc::Status Snapshot(grpc::ServerContext* ctx, const wire::SnapshotRequest* req, wire::SnapshotReply* reply) override;
    grpc::Status Restore(grpc::ServerContext* ctx, const wire::RestoreRequest* req, wire::RestoreReply* reply) override;

private:
    // One step, its failures turned into the status the caller maps back.
    grpc::Status forward_one(const wire::Work& work, wire::Result& result);
    grpc::Status run(const wire::Work& work, wire::Result& result);
    // The pool for the coordinator's slot count, context and route shape
    // (made again when one of them changes: a new coordinator).
    SlotPool& pool_for(const wire::Work& work);
    SlotPool& pool_for(int n_slots, int64_t n_ctx, bool routed, int activation_bits);
    // "" when the coordinator's pool shape fits this worker, else why not.
    std::string check_shape(int n_slots, int64_t n_ctx) const;
    // "" when every sequence can continue at its pos0 here (rewinding where
    // needed and possible), else why not.
    std::string align(const wire::Work& work);
    // Waits (a little) until the step `work` follows has been taken here,
    // then marks `work` taken. Called with mu_ held.
    void take_in_order(std::unique_lock<std::mutex>& lock, const wire::Work& work);

    const Engine& engine_;
    StageConfig config_;
    std::string model_id_;  // the identity a snapshot's part must name
    wire::Slice slice_;
    std::mutex mu_;  // one step's compute at a time: sequences advance in order
    std::condition_variable taken_cv_;
    std::set<uint64_t> taken_;        // request ids of the latest steps taken here
    std::deque<uint64_t> taken_order_;
    std::unique_ptr<SlotPool> pool_;
    int pool_slots_ = 0;
    int64_t pool_ctx_ = 0;
    bool pool_routed_ = false;
    std::shared_ptr<RemoteStages> next_;
    std::atomic<bool> streams_stopping_{false};  // no operation is posted on a stream once set
};

}  // namespace ds4

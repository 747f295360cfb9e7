// A worker's Stage service: runs each step's rows through this process's
// layer slice and on along the route (worker to worker), and answers with
// what came back plus its own telemetry. Before computing, it checks that
// every sequence is where the work says it continues (position and prefix
// hash of its tokens): a worker that restarted or holds another sequence
// answers FAILED_PRECONDITION and the coordinator replays that sequence,
// so no step ever runs at a wrong position.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
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
    int64_t max_ctx = 0;             // the most positions per sequence (--ctx)
    bool debug = false;              // one line per step on the log
};

class StageService final : public wire::Stage::Service {
public:
    StageService(const Engine& engine, StageConfig config);
    // Where this worker serves, once bound (messages and telemetry name it).
    void set_address(std::string address);
    grpc::Status Forward(grpc::ServerContext* ctx, const wire::Work* work, wire::Result* result) override;

private:
    grpc::Status run(const wire::Work& work, wire::Result& result);
    // The pool for the coordinator's slot count, context and route shape
    // (made again when one of them changes: a new coordinator).
    SlotPool& pool_for(const wire::Work& work);
    // "" when every sequence can continue at its pos0 here (rewinding where
    // needed and possible), else why not.
    std::string align(const wire::Work& work);

    const Engine& engine_;
    StageConfig config_;
    wire::Slice slice_;
    std::mutex mu_;  // one step at a time: sequences advance in order
    std::unique_ptr<SlotPool> pool_;
    int pool_slots_ = 0;
    int64_t pool_ctx_ = 0;
    bool pool_routed_ = false;
    std::shared_ptr<RemoteStages> next_;
    std::vector<wire::Hop> next_hops_;  // the route after this stage, as the current work names it
};

}  // namespace ds4

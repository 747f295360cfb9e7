// One long-lived ForwardStream to the next hop, for its steps one at a
// time: a step written to a live stream is answered without the wake-up a
// blocked unary call costs (bench/grpc-hop: ~0.2-0.3 ms a step while the
// stage computes). Only one exchange uses the stream at a time; a step that
// finds it busy (pipelined prefill keeps several in flight) is not taken and
// goes as a unary call instead. A stream that broke is dropped, and its
// step is not answered here either: the caller sends it as a unary call,
// which reports a dead or restarted worker exactly as before (a worker
// that saw the step once rewinds or refuses it by its position checks).
// DS4_PIPELINE_STREAM=0 sends every step as a unary call (A/B).
// The stream runs on a completion queue of its own, which the waiting step
// either sleeps on (the default) or polls without sleeping
// (pipeline_spins(): no wake-up at the answer, at the cost of a core busy
// while the route computes; bench/grpc-hop measured 0.02-0.04 ms a round
// trip on the GPU machine, 0.1 ms on a 2-vCPU VM).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>

#include "pipeline.grpc.pb.h"
#include "pipeline/cluster_key.h"

namespace ds4 {

namespace wire = ds4::pipeline::v1;

class HopStream {
public:
    // `step_deadline`: the time every step gets; a stream lives twice that
    // and is replaced before a step could outlive it.
    HopStream(wire::Stage::Stub& stub, std::optional<ClusterKey> key, std::chrono::seconds step_deadline);
    ~HopStream();
    HopStream(const HopStream&) = delete;
    HopStream& operator=(const HopStream&) = delete;

    // Whether steps may take streams at all (DS4_PIPELINE_STREAM). Read once.
    static bool enabled();

    enum class Outcome {
        kAnswered,  // *result holds the step's result
        kFailed,    // the stage answered with an error: *status (as Forward's)
        kNotTaken,  // busy, off, or the stream broke: send the step as a unary call
    };
    Outcome exchange(const wire::Work& work, wire::Result* result, grpc::Status* status);

private:
    bool open();   // with mu_ held
    void drop();   // with mu_ held: cancels and ends the stream
    // With mu_ held: the stream's status once it ended (a failed operation
    // or a cancel), and the stream and its queue gone.
    grpc::Status finish();
    // Waits until every tag in `tags` has come back from the queue; true
    // when each of them succeeded. The context's deadline bounds the wait.
    bool await(std::initializer_list<void*> tags);

    wire::Stage::Stub& stub_;
    std::optional<ClusterKey> key_;
    std::chrono::seconds step_deadline_;
    std::mutex mu_;  // held by the one exchange on the stream
    std::unique_ptr<grpc::ClientContext> ctx_;
    std::unique_ptr<grpc::CompletionQueue> cq_;
    std::unique_ptr<grpc::ClientAsyncReaderWriter<wire::Work, wire::Result>> rw_;
    std::chrono::system_clock::time_point expires_{};
    bool unsupported_ = false;  // the worker answered UNIMPLEMENTED
};

}  // namespace ds4

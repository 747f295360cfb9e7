// HopStream (pipeline/hop_stream.h) against a real gRPC server on loopback:
// steps one at a time take the hop's one stream; a step that finds it busy,
// broken, or a worker without streams is not taken (the caller then makes
// the unary call, which reports faults as before); a stage's own error comes
// back as its status, and the next step opens a new stream. The stage here
// answers each step with its request id and counts what it saw; what a real
// stage computes is the integration suites' (test_pipeline, route replay).
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <future>
#include <random>
#include <thread>

#include "pipeline/hop_stream.h"
#include "pipeline/transport.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

using namespace std::chrono_literals;

class CountingStage final : public wire::Stage::Service {
public:
    explicit CountingStage(std::optional<ClusterKey> key) : key_(std::move(key)) {}
    std::atomic<int> stream_calls{0}, stream_steps{0}, unary_steps{0};
    std::atomic<int> delay_ms{0};
    std::atomic<int> end_next_step_with{0};  // a status code the next stream step ends its stream with
    std::atomic<bool> streams{true};         // false: an older worker (UNIMPLEMENTED)

    grpc::Status Forward(grpc::ServerContext* ctx, const wire::Work* work, wire::Result* result) override {
        if (grpc::Status auth = check_call(*ctx, key_, "Forward"); !auth.ok()) return auth;
        ++unary_steps;
        result->mutable_output()->set_rows(int64_t(work->request_id()));
        return grpc::Status::OK;
    }
    grpc::Status ForwardStream(grpc::ServerContext* ctx,
                               grpc::ServerReaderWriter<wire::Result, wire::Work>* stream) override {
        ++stream_calls;
        if (!streams) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no streams here");
        if (grpc::Status auth = check_call(*ctx, key_, "ForwardStream"); !auth.ok()) return auth;
        for (;;) {
            wire::Work work;
            if (!stream->Read(&work)) return grpc::Status::OK;
            ++stream_steps;
            std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
            if (const int code = end_next_step_with.exchange(0))
                return grpc::Status(grpc::StatusCode(code), "planted failure of step " + std::to_string(work.request_id()));
            wire::Result result;
            result.mutable_output()->set_rows(int64_t(work.request_id()));
            if (!stream->Write(result)) return grpc::Status::OK;
        }
    }

private:
    std::optional<ClusterKey> key_;
};

class HopStreamTest : public ::testing::Test {
protected:
    void start(std::optional<ClusterKey> server_key = std::nullopt) {
        stage_ = std::make_unique<CountingStage>(std::move(server_key));
        grpc::ServerBuilder b;
        configure_pipeline_server(b);
        int port = 0;
        b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
        b.RegisterService(stage_.get());
        server_ = b.BuildAndStart();
        ASSERT_TRUE(server_ && port > 0);
        stub_ = wire::Stage::NewStub(pipeline_channel("127.0.0.1:" + std::to_string(port)));
    }
    void TearDown() override {
        if (server_) server_->Shutdown(std::chrono::system_clock::now() + 1s);
    }
    // A step with a fresh random request id.
    wire::Work step() {
        wire::Work w;
        w.set_request_id(std::uniform_int_distribution<uint64_t>(1, uint64_t(1) << 40)(rng_));
        return w;
    }

    std::mt19937_64 rng_{test::test_seed()};
    std::unique_ptr<CountingStage> stage_;
    std::unique_ptr<grpc::Server> server_;
    std::unique_ptr<wire::Stage::Stub> stub_;
};

TEST_F(HopStreamTest, StepsOneAtATimeShareOneStream) {
    start();
    HopStream hs(*stub_, std::nullopt, 60s);
    const int n = 3 + int(rng_() % 5);
    for (int i = 0; i < n; ++i) {
        const wire::Work w = step();
        wire::Result r;
        grpc::Status st;
        ASSERT_EQ(hs.exchange(w, &r, &st), HopStream::Outcome::kAnswered) << "step " << i;
        EXPECT_EQ(r.output().rows(), int64_t(w.request_id())) << "step " << i << " got another step's answer";
    }
    EXPECT_EQ(stage_->stream_calls, 1);
    EXPECT_EQ(stage_->stream_steps, n);
    EXPECT_EQ(stage_->unary_steps, 0);
}

TEST_F(HopStreamTest, AStepThatFindsTheStreamBusyIsNotTaken) {
    start();
    stage_->delay_ms = 400;
    HopStream hs(*stub_, std::nullopt, 60s);
    const wire::Work first = step();
    auto slow = std::async(std::launch::async, [&] {
        wire::Result r;
        grpc::Status st;
        const auto o = hs.exchange(first, &r, &st);
        return std::make_pair(o, r.output().rows());
    });
    while (stage_->stream_steps == 0) std::this_thread::sleep_for(1ms);  // the first step is on the stream
    wire::Result r;
    grpc::Status st;
    EXPECT_EQ(hs.exchange(step(), &r, &st), HopStream::Outcome::kNotTaken);
    const auto [outcome, rows] = slow.get();
    EXPECT_EQ(outcome, HopStream::Outcome::kAnswered);
    EXPECT_EQ(rows, int64_t(first.request_id()));
}

TEST_F(HopStreamTest, AStagesErrorComesBackAndTheNextStepOpensANewStream) {
    start();
    HopStream hs(*stub_, std::nullopt, 60s);
    wire::Result r;
    grpc::Status st;
    ASSERT_EQ(hs.exchange(step(), &r, &st), HopStream::Outcome::kAnswered);
    // A stage's own refusals come back as its status (RouteStateLost and
    // the rest are mapped from it by the caller).
    for (const auto code : {grpc::StatusCode::FAILED_PRECONDITION, grpc::StatusCode::ABORTED,
                            grpc::StatusCode::RESOURCE_EXHAUSTED}) {
        stage_->end_next_step_with = int(code);
        const wire::Work w = step();
        ASSERT_EQ(hs.exchange(w, &r, &st), HopStream::Outcome::kFailed);
        EXPECT_EQ(st.error_code(), code);
        EXPECT_EQ(st.error_message(), "planted failure of step " + std::to_string(w.request_id()));
        const wire::Work next = step();
        ASSERT_EQ(hs.exchange(next, &r, &st), HopStream::Outcome::kAnswered);
        EXPECT_EQ(r.output().rows(), int64_t(next.request_id()));
    }
    EXPECT_EQ(stage_->stream_calls, 4);
    // A failure of the transport's kind is the unary call's to report.
    stage_->end_next_step_with = int(grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(hs.exchange(step(), &r, &st), HopStream::Outcome::kNotTaken);
}

TEST_F(HopStreamTest, AWorkerWithoutStreamsIsAskedOnce) {
    start();
    stage_->streams = false;
    HopStream hs(*stub_, std::nullopt, 60s);
    wire::Result r;
    grpc::Status st;
    for (int i = 0; i < 3; ++i) EXPECT_EQ(hs.exchange(step(), &r, &st), HopStream::Outcome::kNotTaken);
    EXPECT_EQ(stage_->stream_calls, 1);
}

TEST_F(HopStreamTest, AStageThatIsGoneIsNotTaken) {
    start();
    HopStream hs(*stub_, std::nullopt, 60s);
    wire::Result r;
    grpc::Status st;
    ASSERT_EQ(hs.exchange(step(), &r, &st), HopStream::Outcome::kAnswered);
    server_->Shutdown(std::chrono::system_clock::now() + 100ms);
    server_.reset();
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(hs.exchange(step(), &r, &st), HopStream::Outcome::kNotTaken);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);  // not the stream's deadline
}

TEST_F(HopStreamTest, TheStreamCarriesTheClusterKey) {
    const ClusterKey key("a cluster key of enough characters " + std::to_string(rng_()));
    start(key);
    wire::Result r;
    grpc::Status st;
    HopStream keyed(*stub_, key, 60s);
    EXPECT_EQ(keyed.exchange(step(), &r, &st), HopStream::Outcome::kAnswered);
    HopStream wrong(*stub_, ClusterKey("another key, also long enough " + std::to_string(rng_())), 60s);
    EXPECT_EQ(wrong.exchange(step(), &r, &st), HopStream::Outcome::kFailed);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    HopStream none(*stub_, std::nullopt, 60s);
    EXPECT_EQ(none.exchange(step(), &r, &st), HopStream::Outcome::kFailed);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace ds4

#include "pipeline/hop_stream.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "pipeline/transport.h"

namespace ds4 {

namespace {
// Codes a stream ends with when it, not the stage, failed: the connection,
// a cancel, the stream's own deadline. The step then goes as a unary call,
// whose status is the one reported (the same code from a stage that passed
// a later hop's failure back costs that step a second try, nothing else).
bool transport_failure(grpc::StatusCode c) {
    return c == grpc::StatusCode::UNAVAILABLE || c == grpc::StatusCode::CANCELLED ||
           c == grpc::StatusCode::DEADLINE_EXCEEDED || c == grpc::StatusCode::UNKNOWN ||
           c == grpc::StatusCode::INTERNAL || c == grpc::StatusCode::UNIMPLEMENTED;
}
}  // namespace

HopStream::HopStream(wire::Stage::Stub& stub, std::optional<ClusterKey> key, std::chrono::seconds step_deadline)
    : stub_(stub), key_(std::move(key)), step_deadline_(step_deadline) {}

HopStream::~HopStream() {
    std::lock_guard<std::mutex> lock(mu_);
    drop();
}

bool HopStream::enabled() {
    static const bool on = [] {
        const char* v = std::getenv("DS4_PIPELINE_STREAM");
        return !(v && std::strcmp(v, "0") == 0);
    }();
    return on;
}

namespace {
// The queue's tags: at most one of each operation is in flight.
void* const kStart = reinterpret_cast<void*>(std::intptr_t{1});
void* const kWrite = reinterpret_cast<void*>(std::intptr_t{2});
void* const kRead = reinterpret_cast<void*>(std::intptr_t{3});
void* const kFinish = reinterpret_cast<void*>(std::intptr_t{4});
}  // namespace

bool HopStream::await(std::initializer_list<void*> tags) {
    bool all_ok = true;
    size_t left = tags.size();
    const bool spin = pipeline_spins();
    while (left > 0) {
        void* tag = nullptr;
        bool ok = false;
        const grpc::CompletionQueue::NextStatus st = next_event(*cq_, spin, &tag, &ok);
        if (st == grpc::CompletionQueue::TIMEOUT) continue;
        if (st == grpc::CompletionQueue::SHUTDOWN) return false;
        for (void* t : tags)
            if (t == tag) {
                --left;
                all_ok = all_ok && ok;
            }
    }
    return all_ok;
}

bool HopStream::open() {
    ctx_ = std::make_unique<grpc::ClientContext>();
    expires_ = std::chrono::system_clock::now() + 2 * step_deadline_;
    ctx_->set_deadline(expires_);
    authenticate_call(*ctx_, key_, "ForwardStream");
    cq_ = std::make_unique<grpc::CompletionQueue>();
    rw_ = stub_.PrepareAsyncForwardStream(ctx_.get(), cq_.get());
    if (!rw_) {
        finish();
        return false;
    }
    rw_->StartCall(kStart);
    if (await({kStart})) return true;
    finish();
    return false;
}

grpc::Status HopStream::finish() {
    grpc::Status st(grpc::StatusCode::UNAVAILABLE, "the step stream was not opened");
    if (rw_) {
        rw_->Finish(&st, kFinish);
        await({kFinish});
    }
    if (cq_) {
        // Every tag back before the queue goes: a queue must be drained.
        cq_->Shutdown();
        void* tag = nullptr;
        bool ok = false;
        while (cq_->Next(&tag, &ok)) {
        }
    }
    rw_.reset();
    cq_.reset();
    ctx_.reset();
    return st;
}

void HopStream::drop() {
    // Cancel first: Finish on a stream whose peer is gone would wait for
    // the stream's deadline.
    if (ctx_) ctx_->TryCancel();
    finish();
}

HopStream::Outcome HopStream::exchange(const wire::Work& work, wire::Result* result, grpc::Status* status) {
    if (!enabled()) return Outcome::kNotTaken;
    std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
    if (!lock.owns_lock() || unsupported_) return Outcome::kNotTaken;  // another step is on the stream
    // A stream too close to its end for a whole step's deadline is replaced.
    if (rw_ && std::chrono::system_clock::now() + step_deadline_ > expires_) drop();
    if (!rw_ && !open()) return Outcome::kNotTaken;
    // The answer's read is posted with the step's write: one wait for both.
    rw_->Write(work, kWrite);
    rw_->Read(result, kRead);
    if (await({kWrite, kRead})) return Outcome::kAnswered;
    // The stream ended: with the stage's own status, or because it broke.
    const grpc::Status st = finish();
    // A worker without the stream (an older build) takes unary calls only.
    if (st.error_code() == grpc::StatusCode::UNIMPLEMENTED) unsupported_ = true;
    if (st.ok() || transport_failure(st.error_code())) return Outcome::kNotTaken;
    *status = st;
    return Outcome::kFailed;
}

}  // namespace ds4

#include "pipeline/hop_stream.h"

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

bool HopStream::open() {
    ctx_ = std::make_unique<grpc::ClientContext>();
    expires_ = std::chrono::system_clock::now() + 2 * step_deadline_;
    ctx_->set_deadline(expires_);
    authenticate_call(*ctx_, key_, "ForwardStream");
    rw_ = stub_.ForwardStream(ctx_.get());
    return rw_ != nullptr;
}

void HopStream::drop() {
    if (rw_) {
        // Cancel first: Finish on a stream whose peer is gone would wait for
        // the stream's deadline.
        ctx_->TryCancel();
        rw_->Finish();
    }
    rw_.reset();
    ctx_.reset();
}

HopStream::Outcome HopStream::exchange(const wire::Work& work, wire::Result* result, grpc::Status* status) {
    if (!enabled()) return Outcome::kNotTaken;
    std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
    if (!lock.owns_lock() || unsupported_) return Outcome::kNotTaken;  // another step is on the stream
    // A stream too close to its end for a whole step's deadline is replaced.
    if (rw_ && std::chrono::system_clock::now() + step_deadline_ > expires_) drop();
    if (!rw_ && !open()) return Outcome::kNotTaken;
    if (rw_->Write(work) && rw_->Read(result)) return Outcome::kAnswered;
    // The stream ended: with the stage's own status, or because it broke.
    const grpc::Status st = rw_->Finish();
    rw_.reset();
    ctx_.reset();
    // A worker without the stream (an older build) takes unary calls only.
    if (st.error_code() == grpc::StatusCode::UNIMPLEMENTED) unsupported_ = true;
    if (st.ok() || transport_failure(st.error_code())) return Outcome::kNotTaken;
    *status = st;
    return Outcome::kFailed;
}

}  // namespace ds4

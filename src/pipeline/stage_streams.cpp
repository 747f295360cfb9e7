// A worker's step streams, served from a completion queue (stage_service.h):
// each stream is a small state machine (accepted -> read a step -> write its
// result -> read the next ... -> finished), driven by one thread. Steps
// compute on that thread, one at a time as they would under the stage's
// lock anyway. With pipeline_spins() the thread polls the queue without
// sleeping while steps keep coming (a step's arrival then costs no wake-up)
// and sleeps on it once none has come for a while, so an idle worker does
// not hold a core.
#include <chrono>

#include "common/log.h"
#include "pipeline/stage_service.h"
#include "pipeline/transport.h"

namespace ds4 {

namespace {
struct StepStream {
    enum class State { kAccepted, kRead, kWritten, kFinished };
    grpc::ServerContext ctx;
    grpc::ServerAsyncReaderWriter<wire::Result, wire::Work> rw{&ctx};
    wire::Work work;
    wire::Result result;
    State state = State::kAccepted;
};
// How long after the last event the driver keeps polling without sleeping:
// well over a decode step, far under what an idle worker should burn.
constexpr std::chrono::milliseconds kSpinAfterEvent{50};
}  // namespace

void StageService::serve_streams(grpc::ServerCompletionQueue& cq) {
    auto accept_next = [&] {
        auto* s = new StepStream;
        RequestForwardStream(&s->ctx, &s->rw, &cq, &cq, s);
    };
    auto finish = [](StepStream* s, const grpc::Status& st) {
        s->state = StepStream::State::kFinished;
        s->rw.Finish(st, s);
    };
    accept_next();
    const bool spin = pipeline_spins();
    auto last_event = std::chrono::steady_clock::now();
    for (;;) {
        void* tag = nullptr;
        bool ok = false;
        const grpc::CompletionQueue::NextStatus next =
            next_event(cq, spin && std::chrono::steady_clock::now() - last_event < kSpinAfterEvent, &tag, &ok);
        if (next == grpc::CompletionQueue::SHUTDOWN) break;
        if (next == grpc::CompletionQueue::TIMEOUT) continue;
        last_event = std::chrono::steady_clock::now();
        auto* s = static_cast<StepStream*>(tag);
        // Once the worker stops nothing more is posted: the server's
        // shutdown cancels what is left and the queue drains.
        if (s->state == StepStream::State::kFinished || streams_stopping_) {
            delete s;
            continue;
        }
        switch (s->state) {
        case StepStream::State::kAccepted:
            if (!ok) {  // the server is shutting down
                delete s;
                continue;
            }
            accept_next();
            // The key is checked once, when the stream opens.
            if (grpc::Status auth = check_call(s->ctx, config_.key, "ForwardStream"); !auth.ok()) {
                log_warning("refused a step stream from " + s->ctx.peer() + ": " + auth.error_message());
                finish(s, auth);
                continue;
            }
            s->state = StepStream::State::kRead;
            s->rw.Read(&s->work, s);
            break;
        case StepStream::State::kRead:
            if (!ok) {  // the caller closed it or is gone
                finish(s, grpc::Status::OK);
                continue;
            }
            s->result.Clear();
            if (grpc::Status st = forward_one(s->work, s->result); !st.ok()) {
                finish(s, st);
                continue;
            }
            if (streams_stopping_) {  // computed while the worker stopped: nothing more goes out
                delete s;
                continue;
            }
            s->state = StepStream::State::kWritten;
            s->rw.Write(s->result, s);
            break;
        case StepStream::State::kWritten:
            if (!ok) {  // the caller is gone
                finish(s, grpc::Status::OK);
                continue;
            }
            s->state = StepStream::State::kRead;
            s->rw.Read(&s->work, s);
            break;
        case StepStream::State::kFinished:
            break;
        }
    }
}

}  // namespace ds4

#include "pipeline/remote_stages.h"

#include <chrono>

#include "common/error.h"
#include "common/stopwatch.h"
#include "pipeline/activations.h"
#include "pipeline/route.h"
#include "pipeline/transport.h"

namespace ds4 {

namespace {
// A step of a huge prefill chunk on a slow CPU stage can take minutes; a
// dead peer is noticed long before through the connection or keepalive.
constexpr std::chrono::minutes kStepDeadline{30};

}  // namespace

std::string describe_stage_failure(const wire::Hop& hop, const grpc::Status& status) {
    const std::string who = "the worker at " + hop.address() + " (" + describe_slice(hop.slice()) + ")";
    const std::string msg = status.error_message();
    switch (status.error_code()) {
        case grpc::StatusCode::ABORTED:  // a later hop's own sentence, passed back unchanged
            return msg;
        case grpc::StatusCode::UNAVAILABLE:
            // Passed back by a worker about a later one: already its sentence.
            if (msg.rfind("the worker at ", 0) == 0 || msg.rfind("the pipeline route", 0) == 0) return msg;
            return who + " did not answer (" + msg + "); the pipeline route is incomplete.";
        case grpc::StatusCode::UNAUTHENTICATED:
            return who + " refused the call: " + msg;
        case grpc::StatusCode::DEADLINE_EXCEEDED:
        case grpc::StatusCode::CANCELLED:
            return who + " did not answer (" + msg + "); the pipeline route is incomplete.";
        default:
            return who + " failed: " + msg;
    }
}

RemoteStages::RemoteStages(HopSource hops, std::optional<ClusterKey> key, std::shared_ptr<const TlsPems> tls,
                           int activation_bits, int64_t n_vocab, TelemetrySink sink)
    : hops_(std::move(hops)),
      key_(std::move(key)),
      tls_(std::move(tls)),
      bits_(activation_bits),
      n_vocab_(n_vocab),
      sink_(std::move(sink)) {}

wire::Stage::Stub& RemoteStages::stub(const std::string& address) {
    auto it = stubs_.find(address);
    if (it == stubs_.end()) it = stubs_.emplace(address, wire::Stage::NewStub(pipeline_channel(address, tls_.get()))).first;
    return *it->second;
}

std::vector<std::vector<float>> RemoteStages::forward(std::span<const RouteSeq> seqs, std::span<const float> hidden,
                                                      int64_t cols, int n_slots, int64_t n_ctx) {
    const std::vector<wire::Hop> route = hops_();
    if (route.empty()) throw Error("the pipeline route after this stage is empty.");
    const auto t_send = std::chrono::steady_clock::now();
    wire::Work work;
    work.set_protocol(kPipelineProtocol);
    work.set_request_id(next_request_++);
    work.set_n_slots(n_slots);
    work.set_n_ctx(n_ctx);
    work.set_activation_bits(bits_);
    int64_t rows = 0, out_rows = 0;
    for (const RouteSeq& s : seqs) {
        wire::SeqWork* w = work.add_seqs();
        w->set_slot(s.slot);
        w->set_pos0(s.pos0);
        w->set_prefix_hash(s.prefix_hash);
        w->mutable_tokens()->Add(s.tokens.begin(), s.tokens.end());
        w->set_all_logits(s.all_logits);
        rows += static_cast<int64_t>(s.tokens.size());
        out_rows += s.all_logits ? static_cast<int64_t>(s.tokens.size()) : 1;
    }
    encode_activations(hidden, rows, cols, bits_, *work.mutable_hidden());
    for (size_t i = 1; i < route.size(); ++i) *work.add_route() = route[i];
    send_ms_ = ms_since(t_send);
    bytes_out_ = activation_bytes(work.hidden());

    const auto t_wait = std::chrono::steady_clock::now();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kStepDeadline);
    authenticate_call(ctx, key_, "Forward");
    wire::Result result;
    const grpc::Status st = stub(route[0].address()).Forward(&ctx, work, &result);
    wait_ms_ = ms_since(t_wait);
    if (st.error_code() == grpc::StatusCode::FAILED_PRECONDITION) throw RouteStateLost(st.error_message());
    if (!st.ok()) {
        const auto code = st.error_code();
        // A stage that is gone (here or further along: UNAVAILABLE passes back unchanged).
        if (code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
            code == grpc::StatusCode::CANCELLED)
            throw StageUnavailable(describe_stage_failure(route[0], st));
        throw Error(describe_stage_failure(route[0], st));
    }

    if (!result.logits())
        throw Error("the route ends at the worker " + route.back().address() +
                    " without the output head, which this coordinator does not hold.");
    const wire::Activations& o = result.output();
    if (o.rows() != out_rows || o.cols() != n_vocab_)
        throw Error("the worker at " + route[0].address() + " returned " + std::to_string(o.rows()) + " x " +
                    std::to_string(o.cols()) + " logits, not " + std::to_string(out_rows) + " x " +
                    std::to_string(n_vocab_) + ".");
    const std::vector<float> all = decode_activations(o);
    std::vector<std::vector<float>> out;
    size_t row = 0;
    for (const RouteSeq& s : seqs) {
        const size_t k = s.all_logits ? s.tokens.size() : 1;
        out.emplace_back(all.begin() + static_cast<ptrdiff_t>(row * n_vocab_),
                         all.begin() + static_cast<ptrdiff_t>((row + k) * n_vocab_));
        row += k;
    }
    last_.request_id = work.request_id();
    last_.hops.assign(result.hops().begin(), result.hops().end());
    if (sink_) {
        RouteTelemetry t;
        t.request_id = work.request_id();
        wire::HopTelemetry self;
        self.set_rows(rows);
        self.set_send_ms(send_ms_);
        self.set_wait_ms(wait_ms_);
        self.set_bytes_out(bytes_out_);
        self.set_bytes_in(activation_bytes(o));
        t.hops.push_back(self);
        t.hops.insert(t.hops.end(), result.hops().begin(), result.hops().end());
        sink_(t);
    }
    return out;
}

}  // namespace ds4

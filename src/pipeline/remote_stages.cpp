#include "pipeline/remote_stages.h"

#include <chrono>
#include <future>
#include <random>

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
                           int activation_bits, RouteEnd end, TelemetrySink sink)
    : hops_(std::move(hops)),
      key_(std::move(key)),
      tls_(std::move(tls)),
      bits_(activation_bits),
      end_(end),
      sink_(std::move(sink)) {
    // Request ids name steps to the stages (telemetry, and which step a
    // pipelined one follows); a random start keeps a restarted
    // coordinator's ids apart from the ones a worker saw before.
    std::random_device rd;
    next_request_ = ((uint64_t(rd()) << 32) | rd()) >> 1 | 1;
}

wire::Stage::Stub& RemoteStages::stub(const std::string& address) {
    std::lock_guard<std::mutex> lock(stubs_mu_);
    auto it = stubs_.find(address);
    if (it == stubs_.end()) it = stubs_.emplace(address, wire::Stage::NewStub(pipeline_channel(address, tls_.get()))).first;
    return *it->second;
}

HopStream& RemoteStages::stream(const std::string& address) {
    wire::Stage::Stub& s = stub(address);
    std::lock_guard<std::mutex> lock(stubs_mu_);
    auto it = streams_.find(address);
    if (it == streams_.end())
        it = streams_
                 .emplace(address, std::make_unique<HopStream>(
                                       s, key_, std::chrono::duration_cast<std::chrono::seconds>(kStepDeadline)))
                 .first;
    return *it->second;
}

RemoteStages::Prepared RemoteStages::prepare(const std::vector<wire::Hop>& route, std::span<const RouteSeq> seqs,
                                             std::span<const float> hidden, int64_t cols, int n_slots, int64_t n_ctx,
                                             uint64_t request_id, uint64_t follows) {
    if (route.empty()) throw Error("the pipeline route after this stage is empty.");
    const auto t_send = std::chrono::steady_clock::now();
    Prepared p;
    wire::Work& work = p.work;
    work.set_protocol(kPipelineProtocol);
    work.set_request_id(request_id);
    work.set_follows(follows);
    work.set_n_slots(n_slots);
    work.set_n_ctx(n_ctx);
    work.set_activation_bits(bits_);
    for (const RouteSeq& s : seqs) {
        wire::SeqWork* w = work.add_seqs();
        w->set_slot(s.slot);
        w->set_pos0(s.pos0);
        w->set_prefix_hash(s.prefix_hash);
        w->mutable_tokens()->Add(s.tokens.begin(), s.tokens.end());
        w->set_all_logits(s.all_logits);
        if (!s.all_logits && s.best > 0) w->set_best(s.best);
        p.rows += static_cast<int64_t>(s.tokens.size());
        p.seq_rows.push_back(s.all_logits ? static_cast<int64_t>(s.tokens.size()) : 1);
        p.out_rows += p.seq_rows.back();
    }
    encode_activations(hidden, p.rows, cols, bits_, *work.mutable_hidden());
    for (size_t i = 1; i < route.size(); ++i) *work.add_route() = route[i];
    p.first = route[0];
    p.last_address = route.back().address();
    p.send_ms = ms_since(t_send);
    p.local_eval_ms = local_eval_ms_.exchange(0);
    p.bytes_out = activation_bytes(work.hidden());
    return p;
}

wire::Result RemoteStages::exchange(const Prepared& p, double* wait_ms) {
    const auto t_wait = std::chrono::steady_clock::now();
    wire::Result result;
    grpc::Status st;
    // The hop's stream when it is free, else (or when it broke) a unary call.
    const HopStream::Outcome on_stream = stream(p.first.address()).exchange(p.work, &result, &st);
    if (on_stream == HopStream::Outcome::kAnswered) {
        *wait_ms = ms_since(t_wait);
        return result;
    }
    if (on_stream == HopStream::Outcome::kNotTaken) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + kStepDeadline);
        authenticate_call(ctx, key_, "Forward");
        result.Clear();
        st = stub(p.first.address()).Forward(&ctx, p.work, &result);
    }
    *wait_ms = ms_since(t_wait);
    if (st.error_code() == grpc::StatusCode::FAILED_PRECONDITION) throw RouteStateLost(st.error_message());
    if (!st.ok()) {
        const auto code = st.error_code();
        // A stage that is gone (here or further along: UNAVAILABLE passes back unchanged).
        if (code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
            code == grpc::StatusCode::CANCELLED)
            throw StageUnavailable(describe_stage_failure(p.first, st));
        throw Error(describe_stage_failure(p.first, st));
    }
    return result;
}

std::vector<std::vector<float>> RemoteStages::finish(const Prepared& p, const wire::Result& result, double wait_ms,
                                                     std::vector<Candidates>* best) {
    // The registration checks keep the head exactly once along the route;
    // this catches a route that changed between them and this step.
    if (!result.logits() && end_.logits)
        throw Error("the route ends at the worker " + p.last_address +
                    " without the output head, which this coordinator does not hold.");
    if (result.logits() && !end_.logits)
        throw Error("the worker " + p.last_address +
                    " applied the output head, which this coordinator holds; the head must run once.");
    // Sequences answered with candidates (only those that asked, each
    // once) send no rows.
    const size_t n_seqs = p.seq_rows.size();
    std::vector<const wire::Candidates*> answered(n_seqs, nullptr);
    int64_t out_rows = p.out_rows;
    for (const wire::Candidates& c : result.best()) {
        const bool asked = c.seq() >= 0 && size_t(c.seq()) < n_seqs && p.work.seqs(c.seq()).best() > 0;
        if (!asked || answered[size_t(c.seq())] || c.ids_size() < 1 || c.ids_size() != c.logits_size() ||
            c.ids_size() > p.work.seqs(c.seq()).best() || best == nullptr || !end_.logits)
            throw Error("the worker at " + p.first.address() + " returned candidate tokens nobody asked for, or " +
                        "malformed ones.");
        answered[size_t(c.seq())] = &c;
        out_rows -= p.seq_rows[size_t(c.seq())];
    }
    const wire::Activations& o = result.output();
    const int64_t cols = end_.cols;
    if (o.rows() != out_rows || (out_rows > 0 && o.cols() != cols))
        throw Error("the worker at " + p.first.address() + " returned " + std::to_string(o.rows()) + " x " +
                    std::to_string(o.cols()) + (end_.logits ? " logits" : " final hidden values") + ", not " +
                    std::to_string(out_rows) + " x " + std::to_string(cols) + ".");
    const std::vector<float> all = out_rows > 0 ? decode_activations(o) : std::vector<float>{};
    std::vector<std::vector<float>> out;
    size_t row = 0;
    for (size_t i = 0; i < n_seqs; ++i) {
        if (const wire::Candidates* c = answered[i]) {
            Candidates& b = (*best)[i];
            b.ids.assign(c->ids().begin(), c->ids().end());
            b.logits.assign(c->logits().begin(), c->logits().end());
            b.first_bad = c->first_bad();
            out.emplace_back();
            continue;
        }
        const int64_t k = p.seq_rows[i];
        out.emplace_back(all.begin() + static_cast<ptrdiff_t>(row * size_t(cols)),
                         all.begin() + static_cast<ptrdiff_t>((row + size_t(k)) * size_t(cols)));
        row += size_t(k);
    }
    if (sink_) {
        RouteTelemetry t;
        t.request_id = p.work.request_id();
        wire::HopTelemetry self;
        self.set_rows(p.rows);
        self.set_eval_ms(p.local_eval_ms);
        self.set_send_ms(p.send_ms);
        self.set_wait_ms(wait_ms);
        self.set_bytes_out(p.bytes_out);
        self.set_bytes_in(result_bytes(result));
        t.hops.push_back(self);
        t.hops.insert(t.hops.end(), result.hops().begin(), result.hops().end());
        sink_(t);
    }
    return out;
}

std::vector<std::vector<float>> RemoteStages::forward(std::span<const RouteSeq> seqs, std::span<const float> hidden,
                                                      int64_t cols, int n_slots, int64_t n_ctx,
                                                      std::vector<Candidates>* best) {
    std::vector<RouteSeq> asked(seqs.begin(), seqs.end());
    if (!best || !end_.logits)
        for (RouteSeq& s : asked) s.best = 0;
    const Prepared p = prepare(hops_(), asked, hidden, cols, n_slots, n_ctx, next_request_++, 0);
    double wait_ms = 0;
    const wire::Result result = exchange(p, &wait_ms);
    return finish(p, result, wait_ms, best);
}

// A submitted step: its call runs on a thread of its own (a blocking gRPC
// call per step in flight; a window holds a handful), and its logits are
// checked and split on the thread that waits.
class RemoteStages::Pending final : public RouteStep {
public:
    Pending(RemoteStages& owner, Prepared p) : owner_(owner), p_(std::move(p)) {
        result_ = std::async(std::launch::async, [this] { return owner_.exchange(p_, &wait_ms_); });
    }
    ~Pending() override {
        if (result_.valid()) result_.wait();  // the call reads p_: never leave it running
    }
    std::vector<std::vector<float>> wait() override {
        const wire::Result result = result_.get();
        return owner_.finish(p_, result, wait_ms_, nullptr);
    }
    uint64_t id() const override { return p_.work.request_id(); }

private:
    RemoteStages& owner_;
    Prepared p_;
    double wait_ms_ = 0;
    std::future<wire::Result> result_;
};

std::unique_ptr<RouteStep> RemoteStages::submit(std::span<const RouteSeq> seqs, std::span<const float> hidden,
                                                int64_t cols, int n_slots, int64_t n_ctx, const RouteStep* after) {
    Prepared p = prepare(hops_(), seqs, hidden, cols, n_slots, n_ctx, next_request_++, after ? after->id() : 0);
    return std::make_unique<Pending>(*this, std::move(p));
}

Relayed RemoteStages::relay(const std::vector<wire::Hop>& route, std::span<const RouteSeq> seqs,
                            std::span<const float> hidden, int64_t cols, int n_slots, int64_t n_ctx,
                            uint64_t request_id, uint64_t follows) {
    const Prepared p = prepare(route, seqs, hidden, cols, n_slots, n_ctx, request_id, follows);
    Relayed r;
    r.result = exchange(p, &r.wait_ms);
    r.send_ms = p.send_ms;
    r.bytes_out = p.bytes_out;
    return r;
}

}  // namespace ds4

#include "pipeline/stage_service.h"

#include <chrono>
#include <cstdio>

#include "common/error.h"
#include "common/stopwatch.h"
#include "common/log.h"
#include "engine/engine.h"
#include "mapping/model_identity.h"
#include "models/family.h"
#include "pipeline/activations.h"
#include "pipeline/route.h"
#include "pipeline/transport.h"

namespace ds4 {

namespace {
grpc::Status bad(const std::string& why) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why); }

// Each sequence's rows the coordinator wants logits of (every one with
// all_logits, else its last), from the hidden rows of every token.
std::vector<float> wanted_rows(const std::vector<std::vector<float>>& per_seq, const wire::Work& work, int64_t width) {
    std::vector<float> flat;
    for (int i = 0; i < work.seqs_size(); ++i) {
        const std::vector<float>& rows = per_seq[size_t(i)];
        const size_t keep = work.seqs(i).all_logits() ? rows.size() : size_t(width);
        flat.insert(flat.end(), rows.end() - static_cast<ptrdiff_t>(keep), rows.end());
    }
    return flat;
}
}  // namespace

StageService::StageService(const Engine& engine, StageConfig config)
    : engine_(engine),
      config_(std::move(config)),
      model_id_(model_identity(engine.file())),
      slice_(make_slice(engine.info().layers, engine.info().n_layer)) {}

void StageService::set_address(std::string address) {
    std::lock_guard<std::mutex> lock(mu_);
    config_.address = std::move(address);
}

grpc::Status StageService::Forward(grpc::ServerContext* ctx, const wire::Work* work, wire::Result* result) {
    if (grpc::Status auth = check_call(*ctx, config_.key, "Forward"); !auth.ok()) {
        log_warning("refused a step from " + ctx->peer() + ": " + auth.error_message());
        return auth;
    }
    return forward_one(*work, *result);
}

grpc::Status StageService::forward_one(const wire::Work& work, wire::Result& result) {
    try {
        return run(work, result);
    } catch (const RouteStateLost& e) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, e.what());
    } catch (const StageUnavailable& e) {
        // A later worker is gone: the coordinator answers 503, not 500.
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, e.what());
    } catch (const Error& e) {
        // A sentence that already names the hop at fault travels back as it is.
        return grpc::Status(grpc::StatusCode::ABORTED, e.what());
    } catch (const std::bad_alloc&) {
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            "the worker at " + config_.address + " ran out of memory.");
    }
}

SlotPool& StageService::pool_for(const wire::Work& work) {
    return pool_for(work.n_slots(), work.n_ctx(), work.route_size() > 0, work.activation_bits());
}

std::string StageService::check_shape(int n_slots, int64_t n_ctx) const {
    if (n_slots < 1 || n_slots > engine_.model().max_slots())
        return "the worker at " + config_.address + " runs 1 to " + std::to_string(engine_.model().max_slots()) +
               " sequences at once, not " + std::to_string(n_slots) + ".";
    if (n_ctx < 1 || n_ctx > config_.max_ctx)
        return "the worker at " + config_.address + " holds at most " + std::to_string(config_.max_ctx) +
               " positions per sequence (--ctx), the coordinator asks for " + std::to_string(n_ctx) + ".";
    return "";
}

SlotPool& StageService::pool_for(int n_slots, int64_t n_ctx, bool routed, int activation_bits) {
    if (!pool_ || pool_slots_ != n_slots || pool_ctx_ != n_ctx || pool_routed_ != routed) {
        pool_.reset();
        next_.reset();
        // relay() is given each step's route (the work names it).
        if (routed)
            next_ = std::make_shared<RemoteStages>([] { return std::vector<wire::Hop>{}; }, config_.key, config_.tls,
                                                   activation_bits, RemoteStages::RouteEnd{});
        // The pool computes this slice only; run() relays its rows (outside
        // the lock, so the next step can compute meanwhile).
        pool_ = std::make_unique<SlotPool>(engine_.model(), engine_.backend(), n_slots, n_ctx,
                                           /*replay_decode=*/true);
        pool_slots_ = n_slots;
        pool_ctx_ = n_ctx;
        pool_routed_ = routed;
    }
    return *pool_;
}

std::string StageService::align(const wire::Work& work) {
    for (const wire::SeqWork& s : work.seqs()) {
        const int slot = s.slot();
        const int64_t here = pool_->n_past(slot);
        if (s.pos0() == 0) {
            pool_->reset(slot);
            continue;
        }
        const bool same = s.pos0() <= here && pool_->prefix_hash(slot, s.pos0()) == s.prefix_hash();
        if (same && (s.pos0() == here || pool_->try_rewind(slot, s.pos0()))) continue;
        return "the worker at " + config_.address + " holds " + std::to_string(here) + " positions of sequence slot " +
               std::to_string(slot) + (same ? " and cannot rewind to " : ", not the sequence that continues at ") +
               std::to_string(s.pos0()) + ".";
    }
    return "";
}

void StageService::take_in_order(std::unique_lock<std::mutex>& lock, const wire::Work& work) {
    // The step this one follows was sent before it, so it is at most a
    // network hiccup behind; past this wait, the position and prefix-hash
    // checks decide (a restarted worker never sees it, and refuses).
    constexpr std::chrono::seconds kFollowWait{10};
    if (work.follows() != 0)
        taken_cv_.wait_for(lock, kFollowWait, [&] { return taken_.count(work.follows()) > 0; });
    if (taken_.insert(work.request_id()).second) taken_order_.push_back(work.request_id());
    while (taken_order_.size() > 256) {
        taken_.erase(taken_order_.front());
        taken_order_.pop_front();
    }
    taken_cv_.notify_all();
}

grpc::Status StageService::run(const wire::Work& work, wire::Result& result) {
    const auto t0 = std::chrono::steady_clock::now();
    const ModelInfo& info = engine_.info();
    std::unique_lock<std::mutex> lock(mu_);
    take_in_order(lock, work);
    const auto t_taken = std::chrono::steady_clock::now();
    if (work.protocol() != kPipelineProtocol)
        return bad("the coordinator speaks pipeline protocol " + std::to_string(work.protocol()) + ", this worker " +
                   std::to_string(kPipelineProtocol) + ".");
    if (std::string why = check_shape(work.n_slots(), work.n_ctx()); !why.empty()) return bad(why);
    if (work.seqs_size() == 0) return bad("a step without sequences.");
    int64_t rows = 0;
    for (const wire::SeqWork& s : work.seqs()) {
        if (s.slot() < 0 || s.slot() >= work.n_slots() || s.pos0() < 0 || s.tokens_size() == 0)
            return bad("a step names sequence slot " + std::to_string(s.slot()) + " at position " +
                       std::to_string(s.pos0()) + " with " + std::to_string(s.tokens_size()) + " tokens.");
        rows += s.tokens_size();
    }
    if (work.hidden().rows() != rows || work.hidden().cols() != engine_.model().hidden_cols())
        return bad("the step's activations are " + std::to_string(work.hidden().rows()) + " x " +
                   std::to_string(work.hidden().cols()) + ", this stage takes " + std::to_string(rows) + " x " +
                   std::to_string(engine_.model().hidden_cols()) + ".");
    const std::vector<float> hidden = decode_activations(work.hidden());

    SlotPool& pool = pool_for(work);
    if (std::string why = align(work); !why.empty())
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, why);

    std::vector<SeqStep> steps;
    for (const wire::SeqWork& s : work.seqs()) {
        if (s.best() < 0 || s.best() > Backend::kMaxTopK)
            return bad("a step asks for " + std::to_string(s.best()) + " candidate tokens; 0 to " +
                       std::to_string(Backend::kMaxTopK) + " can be returned.");
        steps.push_back(SeqStep{s.slot(), std::span<const int32_t>(s.tokens().data(), s.tokens().size()),
                                s.all_logits(), s.all_logits() ? 0 : s.best()});
    }
    // This slice's rows: logits when it holds the head, else hidden rows for
    // the next hop. The pool advances here and now; should the rest of the
    // route fail, the coordinator's next step names an earlier position and
    // align() rewinds (or refuses, and the coordinator replays).
    std::vector<Candidates> best;  // where the head is here and a sequence asked
    const std::vector<std::vector<float>> out = pool.step(steps, hidden, &best);
    const std::shared_ptr<RemoteStages> next = next_;
    const bool head = pool.local_head();
    const double eval_ms = ms_since(t_taken);
    lock.unlock();

    std::vector<float> flat;
    for (const auto& o : out) flat.insert(flat.end(), o.begin(), o.end());
    wire::HopTelemetry me;
    me.set_address(config_.address);
    *me.mutable_slice() = slice_;
    me.set_rows(rows);
    me.set_eval_ms(eval_ms);
    me.set_bytes_in(activation_bytes(work.hidden()));
    if (next) {
        std::vector<RouteSeq> seqs;
        for (const wire::SeqWork& s : work.seqs())
            seqs.push_back(RouteSeq{s.slot(), s.pos0(), s.prefix_hash(),
                                    std::span<const int32_t>(s.tokens().data(), s.tokens().size()), s.all_logits(),
                                    s.best()});
        const std::vector<wire::Hop> route(work.route().begin(), work.route().end());
        Relayed r = next->relay(route, seqs, flat, engine_.model().hidden_cols(), work.n_slots(), work.n_ctx(),
                                work.request_id(), work.follows());
        // What came back goes upstream as it is (no decoding and encoding
        // again), after this hop's own record.
        *result.mutable_output() = std::move(*r.result.mutable_output());
        result.set_logits(r.result.logits());
        *result.mutable_best() = std::move(*r.result.mutable_best());
        me.set_wait_ms(r.wait_ms);
        me.set_send_ms(r.send_ms);
        me.set_bytes_out(r.bytes_out);
        *result.add_hops() = me;
        for (const wire::HopTelemetry& h : r.result.hops()) *result.add_hops() = h;
    } else {
        // Logits (f32: the sampler's input), else the final hidden rows for
        // the coordinator that owns the head: only those whose logits it
        // wants (a prefill chunk sends back one row per sequence, not all).
        const auto t_enc = std::chrono::steady_clock::now();
        const int64_t width = head ? info.n_vocab : engine_.model().hidden_cols();
        if (!head) flat = wanted_rows(out, work, width);
        for (size_t i = 0; i < best.size(); ++i) {
            if (best[i].empty()) continue;
            wire::Candidates* c = result.add_best();
            c->set_seq(static_cast<int32_t>(i));
            c->mutable_ids()->Add(best[i].ids.begin(), best[i].ids.end());
            c->mutable_logits()->Add(best[i].logits.begin(), best[i].logits.end());
            c->set_first_bad(best[i].first_bad);
        }
        encode_activations(flat, static_cast<int64_t>(flat.size()) / width, width, head ? 32 : work.activation_bits(),
                           *result.mutable_output());
        result.set_logits(head);
        me.set_send_ms(ms_since(t_enc));
        me.set_bytes_out(result_bytes(result));
        *result.add_hops() = me;
    }
    if (config_.debug) {
        char line[256];
        std::snprintf(line, sizeof line,
                      "step %llu: %lld rows, slot %d at %lld: eval %.2f ms, wait %.2f ms, send %.2f ms (%.2f ms in all)",
                      static_cast<unsigned long long>(work.request_id()), static_cast<long long>(rows),
                      work.seqs(0).slot(), static_cast<long long>(work.seqs(0).pos0()), me.eval_ms(), me.wait_ms(),
                      me.send_ms(), ms_since(t0));
        log_info(line);
    }
    return grpc::Status::OK;
}

}  // namespace ds4

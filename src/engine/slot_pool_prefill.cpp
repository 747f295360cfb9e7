// Pipelined prefill: a prompt's chunks travel the route with up to `window`
// of them in flight, so stage k computes chunk i while stage k+1 computes
// chunk i-1. This stage's state advances as soon as its own slice has run a
// chunk (the next chunk continues from it); a chunk counts as done only once
// the whole route answered for it, and a failure rolls the slot back there.
#include <chrono>
#include <deque>

#include "common/error.h"
#include "common/log.h"
#include "engine/slot_pool.h"

namespace ds4 {

std::vector<float> SlotPool::prefill(int slot, std::span<const int32_t> tokens, int64_t chunk, int window,
                                     bool all_logits, const std::function<void(int64_t, int64_t)>& progress) {
    check_slot(slot);
    if (chunk < 1) throw Error("the prefill chunk must be at least 1 token.");
    const int64_t n = static_cast<int64_t>(tokens.size());
    std::vector<float> out;
    if (!downstream_ || !embeds() || window <= 1 || n <= chunk) {
        // Nothing to overlap: one chunk after another, each along the whole
        // route (a single chunk, a decode step: the slot moves only once the
        // route answered, so a failure leaves it exactly where it was).
        for (int64_t done = 0; done < n;) {
            const int64_t m = std::min(chunk, n - done);
            const SeqStep step{slot, tokens.subspan(static_cast<size_t>(done), static_cast<size_t>(m)), all_logits};
            std::vector<float> logits = std::move(this->step(std::span<const SeqStep>(&step, 1)).front());
            if (all_logits || done + m == n) out.insert(out.end(), logits.begin(), logits.end());
            done += m;
            if (progress) progress(done, n);
        }
        return out;
    }
    if (n_past(slot) + n > n_ctx_)
        throw Error("the context of " + std::to_string(n_ctx_) + " tokens cannot hold " +
                    std::to_string(n_past(slot) + n) + " tokens; raise --ctx.");
    int64_t done = 0;
    std::vector<int32_t> lost;
    try {
        prefill_window(slot, tokens, chunk, window, all_logits, &out, &done, &lost, progress);
    } catch (const RouteStateLost& e) {
        // A later stage lost the sequence (a worker restarted). This pool
        // holds its tokens: they go along the route again from position 0
        // (which resets every stage), their logits unwanted, then the rest.
        log_warning(std::string(e.what()) + " Replaying the sequence's history through the route.");
        std::vector<int32_t> held = lost.empty() ? history_[static_cast<size_t>(slot)].tokens() : lost;
        reset(slot);
        std::vector<float> none;
        int64_t replayed = 0;
        std::vector<int32_t> lost_again;
        prefill_window(slot, held, chunk, window, false, &none, &replayed, &lost_again, {});
        prefill_window(slot, tokens, chunk, window, all_logits, &out, &done, &lost_again, progress);
    }
    return out;
}

void SlotPool::prefill_window(int slot, std::span<const int32_t> tokens, int64_t chunk, int window, bool all_logits,
                              std::vector<float>* out, int64_t* done, std::vector<int32_t>* lost,
                              const std::function<void(int64_t, int64_t)>& progress) {
    struct InFlight {
        std::unique_ptr<RouteStep> step;
        int64_t n = 0;
    };
    const int64_t n = static_cast<int64_t>(tokens.size());
    const int64_t confirmed0 = n_past(slot);  // what the whole route holds of the slot when this starts
    const int64_t done0 = *done;
    std::deque<InFlight> flight;
    int64_t sent = *done;
    // Waits for the oldest chunk in flight: done once the route answers.
    auto collect = [&] {
        InFlight f = std::move(flight.front());
        flight.pop_front();
        std::vector<float> logits = std::move(f.step->wait().front());
        // The head (when it runs here) only for the rows kept.
        if (all_logits || *done + f.n == n) {
            logits = route_logits(std::move(logits));
            out->insert(out->end(), logits.begin(), logits.end());
        }
        *done += f.n;
        if (progress) progress(*done, n);
    };
    try {
        while (sent < n) {
            const int64_t m = std::min(chunk, n - sent);
            const SeqStep r{slot, tokens.subspan(static_cast<size_t>(sent), static_cast<size_t>(m)), all_logits};
            const auto t0 = std::chrono::steady_clock::now();
            LocalRows local = run_local(std::span<const SeqStep>(&r, 1), {});
            const std::vector<float> hidden = local.download(backend_);  // waits for the device: part of the stage's time
            downstream_->note_local_eval_ms(
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
            const int64_t past = n_past_[static_cast<size_t>(slot)];
            const RouteSeq seq{slot, past, history_[static_cast<size_t>(slot)].prefix_hash(past), r.tokens, all_logits};
            std::unique_ptr<RouteStep> st = downstream_->submit(std::span<const RouteSeq>(&seq, 1), hidden,
                                                                local.cols, n_slots(), n_ctx_,
                                                                flight.empty() ? nullptr : flight.back().step.get());
            commit(std::span<const SeqStep>(&r, 1));  // the next chunk continues this stage from here
            flight.push_back(InFlight{std::move(st), m});
            sent += m;
            if (static_cast<int>(flight.size()) >= window) collect();
        }
        while (!flight.empty()) collect();
    } catch (...) {
        // Every call still in flight ends before anything else happens (they
        // read this pool's rows); their own failures add nothing.
        for (InFlight& f : flight) {
            try {
                f.step->wait();
            } catch (...) {
            }
        }
        flight.clear();
        // Back to what the whole route finished. A model whose caches cannot
        // resume there starts the slot over; `lost` keeps what it held.
        const int64_t confirmed = confirmed0 + (*done - done0);
        if (!try_rewind(slot, confirmed)) {
            const std::vector<int32_t>& held = history_[static_cast<size_t>(slot)].tokens();
            lost->assign(held.begin(), held.begin() + static_cast<ptrdiff_t>(confirmed));
            reset(slot);
        }
        throw;
    }
}

}  // namespace ds4

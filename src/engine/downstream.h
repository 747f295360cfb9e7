// The stages after this process's layer slice: a pipeline route of other
// processes (pipeline/). A SlotPool whose model stops before the output head
// hands each step's hidden rows to its downstream and gets the logits back,
// so sessions and the scheduler work the same whether the model is local or
// split across hosts.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/bulk_floats.h"
#include "common/error.h"
#include "sampling/candidates.h"

namespace ds4 {

// One sequence's part of a step, as the stages after this one see it.
struct RouteSeq {
    int slot = 0;
    int64_t pos0 = 0;          // position of tokens[0]
    uint64_t prefix_hash = 0;  // TokenHistory hash of the sequence's tokens before pos0
    std::span<const int32_t> tokens;
    bool all_logits = false;
    int best = 0;  // SeqStep::best: the route's head stage may answer with candidates
};

// A later stage does not hold the sequence the step continues (a restarted
// worker, a rewind its caches cannot do): the pool that embeds the tokens
// replays the sequence's history from position 0 and retries.
class RouteStateLost : public Error {
public:
    explicit RouteStateLost(const std::string& sentence) : Error(sentence) {}
};

// A stage of the route is not there (a worker died, timed out, or no
// worker serves some blocks): the step fails and nothing advanced; a server
// answers 503, since the request may succeed once the route is whole again.
class StageUnavailable : public Error {
public:
    explicit StageUnavailable(const std::string& sentence) : Error(sentence) {}
};

// One later stage's share of a sequence snapshot: its slot's tensors,
// tagged with the blocks [begin, end) and the model identity it ran, so a
// stage serving something else refuses it.
struct RouteStatePart {
    int begin = 0, end = 0;
    std::string model_id;
    std::vector<StateFloats> tensors;
    uint64_t bytes() const;
};

// A step sent along the route whose logits have not been collected yet.
class RouteStep {
public:
    virtual ~RouteStep() = default;
    // Blocks until the route answers; returns what forward() would have
    // (and throws what it would have). Call once.
    virtual std::vector<std::vector<float>> wait() = 0;
    // Names the step to the stages, so one sent after it can say so (they
    // take steps of a window in this order, whatever order they arrive in).
    virtual uint64_t id() const { return 0; }
};

class Downstream {
public:
    virtual ~Downstream() = default;
    // Starts forward() and returns before the route answers, so this stage
    // can compute the next prefill chunk meanwhile (pipelined prefill).
    // `after`: the step sent just before this one and still in flight, if
    // any: every stage takes this one after it. Copies what it needs from
    // `seqs` and `hidden` before returning. The default runs forward() at
    // once (a route with nothing to overlap).
    virtual std::unique_ptr<RouteStep> submit(std::span<const RouteSeq> seqs, std::span<const float> hidden,
                                              int64_t cols, int n_slots, int64_t n_ctx, const RouteStep* after);
    // Runs the hidden rows ([rows x cols]: every token of every sequence, in
    // order) through the rest of the route. Returns each sequence's logits
    // ([k x n_vocab] row-major; k = its tokens when all_logits, else 1).
    // The pool has n_slots sequences of up to n_ctx positions. Throws
    // RouteStateLost, or ds4::Error naming the hop that failed. With `best`
    // (one entry per sequence), a sequence whose RouteSeq::best the route
    // answered with candidates gets them there and an empty logits vector.
    virtual std::vector<std::vector<float>> forward(std::span<const RouteSeq> seqs, std::span<const float> hidden,
                                                    int64_t cols, int n_slots, int64_t n_ctx,
                                                    std::vector<Candidates>* best) = 0;    // How long this process's own slice took for the step about to be sent
    // (telemetry: the route's hop 0). Called just before forward()/submit(),
    // on the same thread.
    virtual void note_local_eval_ms(double) {}

    // Each later stage's state of the sequence in `slot`, which holds n_past
    // positions hashing to prefix_hash, in route order; empty when a stage
    // cannot give it (the snapshot then holds this process's part only, and
    // restoring it replays the history through the route as before).
    virtual std::vector<RouteStatePart> snapshot_route(int /*slot*/, int64_t /*n_past*/, uint64_t /*prefix_hash*/) {
        return {};
    }
    // Puts the parts back on the stages (the slot there then holds `tokens`);
    // "" when every stage took its part, else the sentence why not (a stage
    // serves another slice or model now): the next step replays the history.
    virtual std::string restore_route(int /*slot*/, int /*n_slots*/, int64_t /*n_ctx*/,
                                      std::span<const int32_t> /*tokens*/, uint64_t /*prefix_hash*/,
                                      const std::vector<RouteStatePart>& /*parts*/) {
        return "the route cannot restore snapshots.";
    }
};

namespace detail {
class ReadyStep final : public RouteStep {
public:
    explicit ReadyStep(std::vector<std::vector<float>> out) : out_(std::move(out)) {}
    std::vector<std::vector<float>> wait() override { return std::move(out_); }

private:
    std::vector<std::vector<float>> out_;
};
}  // namespace detail

inline uint64_t RouteStatePart::bytes() const {
    uint64_t n = 0;
    for (const auto& t : tensors) n += t.size() * sizeof(float);
    return n;
}

inline std::unique_ptr<RouteStep> Downstream::submit(std::span<const RouteSeq> seqs, std::span<const float> hidden,
                                                     int64_t cols, int n_slots, int64_t n_ctx, const RouteStep*) {
    return std::make_unique<detail::ReadyStep>(forward(seqs, hidden, cols, n_slots, n_ctx, nullptr));
}

}  // namespace ds4

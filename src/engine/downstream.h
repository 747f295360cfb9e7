// The stages after this process's layer slice: a pipeline route of other
// processes (pipeline/). A SlotPool whose model stops before the output head
// hands each step's hidden rows to its downstream and gets the logits back,
// so sessions and the scheduler work the same whether the model is local or
// split across hosts.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"

namespace ds4 {

// One sequence's part of a step, as the stages after this one see it.
struct RouteSeq {
    int slot = 0;
    int64_t pos0 = 0;          // position of tokens[0]
    uint64_t prefix_hash = 0;  // TokenHistory hash of the sequence's tokens before pos0
    std::span<const int32_t> tokens;
    bool all_logits = false;
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

class Downstream {
public:
    virtual ~Downstream() = default;
    // Runs the hidden rows ([rows x cols]: every token of every sequence, in
    // order) through the rest of the route. Returns each sequence's logits
    // ([k x n_vocab] row-major; k = its tokens when all_logits, else 1).
    // The pool has n_slots sequences of up to n_ctx positions. Throws
    // RouteStateLost, or ds4::Error naming the hop that failed.
    virtual std::vector<std::vector<float>> forward(std::span<const RouteSeq> seqs, std::span<const float> hidden,
                                                    int64_t cols, int n_slots, int64_t n_ctx) = 0;
};

}  // namespace ds4

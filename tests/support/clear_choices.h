// Inputs on which the CPU reference decides every top-k choice clearly, for
// the tests that hold another engine (the GPU) to the CPU at 1e-5.
//
// Where a routing or indexer choice of the CPU lies within
// kMinSelectionMargin of a tie (support/near_tie.h), a correct GPU summing
// in another order may choose the other set and that row's logits differ
// by ~1e-2: the input proves nothing about either engine. As the oracle
// tests do with llama.cpp's margins (clearly_decided_reference), the tokens
// from the first such position on are drawn again and the reference runs
// again; every row of the final input is still compared at the full bound.
// The margins are the reference's own (CpuBackend::watch_selection_margins),
// so the engine under test has no say in which inputs are kept.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "support/near_tie.h"

namespace ds4::test {

// The smallest selection margin of each position a run went through, pass by
// pass: each pass's rows must be consecutive positions (one prefill pass of
// the whole prompt, then single-token steps), which end_pass() checks as far
// as it can see.
class MarginLog {
public:
    explicit MarginLog(Backend& backend) : cpu_(dynamic_cast<CpuBackend*>(&backend)) {
        if (!cpu_) throw std::runtime_error("selection margins come from the CPU backend, not " + backend.name());
        cpu_->watch_selection_margins(&pass_);
    }
    ~MarginLog() { cpu_->watch_selection_margins(nullptr); }
    MarginLog(const MarginLog&) = delete;
    MarginLog& operator=(const MarginLog&) = delete;

    // After a forward pass over `rows` positions.
    void end_pass(size_t rows) {
        if (pass_.size() > rows)
            throw std::runtime_error("a pass of " + std::to_string(rows) + " rows made choices for " +
                                     std::to_string(pass_.size()) + ": it ran in smaller passes");
        pass_.resize(rows, std::numeric_limits<double>::infinity());
        by_position_.insert(by_position_.end(), pass_.begin(), pass_.end());
        pass_.clear();
    }

    // The first position with a choice closer than kMinSelectionMargin to a
    // tie, or npos.
    size_t first_close_call() const {
        for (size_t p = 0; p < by_position_.size(); ++p)
            if (by_position_[p] < kMinSelectionMargin) return p;
        return npos;
    }
    double at(size_t p) const { return by_position_[p]; }

    static constexpr size_t npos = size_t(-1);

private:
    CpuBackend* cpu_;
    std::vector<double> pass_;
    std::vector<double> by_position_;
};

// Runs `reference(tokens, log)` (which must call log.end_pass after each
// forward pass) until no position of `tokens` is a close call, drawing the
// tokens from the first close call on again each time. Returns how many
// redraws it took; throws after 64.
template <class Reference>
int redraw_until_clear(Backend& cpu, std::vector<int32_t>& tokens, int32_t n_vocab, std::mt19937_64& rng,
                       Reference&& reference) {
    constexpr int kMaxRedraws = 64;
    std::uniform_int_distribution<int32_t> tok(0, n_vocab - 1);
    for (int attempt = 0;; ++attempt) {
        MarginLog log(cpu);
        reference(tokens, log);
        const size_t close = log.first_close_call();
        if (close == MarginLog::npos) return attempt;
        if (attempt == kMaxRedraws)
            throw std::runtime_error("the CPU still makes a top-k choice within " +
                                     std::to_string(kMinSelectionMargin) + " of a tie at position " +
                                     std::to_string(close) + " after " + std::to_string(kMaxRedraws) + " redraws");
        std::printf("  reference: position %zu is %.2e from a tie; drawing tokens %zu.. again\n", close,
                    log.at(close), close);
        for (size_t i = close; i < tokens.size(); ++i) tokens[i] = tok(rng);
    }
}

}  // namespace ds4::test

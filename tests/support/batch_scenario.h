// A batching scenario shared by the CPU and CUDA tests: several sequences of
// different lengths run through one SlotPool, one forward pass per step,
// each step mixing prefill chunks of some sequences with single-token
// decodes of others; a slot is reset and reused mid-way. Every sequence's
// logits must equal what the same sequence gets alone in a Session.
//
// The decode tokens are fixed up front (each sequence's continuation is
// drawn at random), so a near-tie between two backends can never make the
// runs feed different tokens.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/session.h"
#include "support/clear_choices.h"
#include "engine/slot_pool.h"

namespace ds4::test {

struct ScenarioSequence {
    std::vector<int32_t> prompt;
    std::vector<int32_t> continuation;  // fed one token per step after the prompt
    std::vector<float> logits;          // every row, prompt then continuation: [rows x n_vocab]
};

// Sequences with prompts of lo..hi tokens and `decode` continuation tokens.
inline std::vector<ScenarioSequence> draw_sequences(std::mt19937_64& rng, int count, int32_t n_vocab, int lo, int hi,
                                                    int decode) {
    std::vector<ScenarioSequence> seqs(static_cast<size_t>(count));
    std::uniform_int_distribution<int32_t> tok(0, n_vocab - 1);
    std::uniform_int_distribution<int> len(lo, hi);
    for (auto& s : seqs) {
        s.prompt.resize(static_cast<size_t>(len(rng)));
        for (auto& t : s.prompt) t = tok(rng);
        s.continuation.resize(static_cast<size_t>(decode));
        for (auto& t : s.continuation) t = tok(rng);
    }
    return seqs;
}

// Each sequence alone: one Session, the prompt then the continuation one
// token at a time; fills `logits` with every row. With `clear_choices` (a CPU
// `backend`, the reference of a test on another engine), a sequence whose
// run makes a top-k choice near a tie gets its tokens from there on drawn
// again (support/clear_choices.h).
inline void run_alone(const Model& model, Backend& backend, std::vector<ScenarioSequence>& seqs, int64_t n_ctx,
                      std::mt19937_64* clear_choices = nullptr) {
    constexpr int64_t kChunk = 4096;  // a prompt is one pass: margins are logged pass by pass
    auto run_one = [&](ScenarioSequence& s, MarginLog* log) {
        if (int64_t(s.prompt.size()) > kChunk) throw std::runtime_error("run_alone: a prompt longer than one pass");
        Session session(model, backend, SessionOptions{n_ctx, kChunk});
        s.logits = session.eval(s.prompt, true);
        if (log) log->end_pass(s.prompt.size());
        for (int32_t t : s.continuation) {
            const auto row = session.eval(std::vector<int32_t>{t}, false);
            if (log) log->end_pass(1);
            s.logits.insert(s.logits.end(), row.begin(), row.end());
        }
    };
    for (auto& s : seqs) {
        if (!clear_choices) {
            run_one(s, nullptr);
            continue;
        }
        std::vector<int32_t> tokens = s.prompt;
        tokens.insert(tokens.end(), s.continuation.begin(), s.continuation.end());
        const size_t n_prompt = s.prompt.size();
        redraw_until_clear(backend, tokens, int32_t(model.info().n_vocab), *clear_choices,
                           [&](const std::vector<int32_t>& t, MarginLog& log) {
                               s.prompt.assign(t.begin(), t.begin() + std::ptrdiff_t(n_prompt));
                               s.continuation.assign(t.begin() + std::ptrdiff_t(n_prompt), t.end());
                               run_one(s, &log);
                           });
    }
}

struct BatchedRun {
    std::vector<std::vector<float>> logits;  // per sequence, every row
    int steps = 0;                           // forward passes
    int mixed_steps = 0;                     // passes with both a prefill chunk and a decode
    int64_t replayed = 0;                    // passes that replayed a recording
};

// The sequences through one pool of `n_slots` slots: sequence i starts in a
// free slot when one is free; each step gives every running sequence its
// next random prefill chunk (1..max_chunk tokens, all logits) or, once its
// prompt is in, its next continuation token; a finished sequence frees its
// slot (reset) for the next one.
inline BatchedRun run_batched(const Model& model, Backend& backend, const std::vector<ScenarioSequence>& seqs,
                              int n_slots, int64_t n_ctx, int max_chunk, std::mt19937_64& rng) {
    SlotPool pool(model, backend, n_slots, n_ctx);
    BatchedRun out;
    out.logits.resize(seqs.size());
    std::vector<int> slot_of(seqs.size(), -1);
    std::vector<size_t> fed(seqs.size(), 0);
    std::vector<int> owner(static_cast<size_t>(n_slots), -1);
    size_t next = 0, finished = 0;
    while (finished < seqs.size()) {
        for (int s = 0; s < n_slots && next < seqs.size(); ++s)
            if (owner[static_cast<size_t>(s)] < 0) {
                owner[static_cast<size_t>(s)] = static_cast<int>(next);
                slot_of[next] = s;
                pool.reset(s);
                ++next;
            }
        std::vector<SeqStep> step;
        std::vector<int> who;
        bool prefill = false, decode = false;
        for (int s = 0; s < n_slots; ++s) {
            const int i = owner[static_cast<size_t>(s)];
            if (i < 0) continue;
            const ScenarioSequence& q = seqs[static_cast<size_t>(i)];
            size_t& f = fed[static_cast<size_t>(i)];
            SeqStep r;
            r.slot = s;
            if (f < q.prompt.size()) {
                const size_t n = std::min(q.prompt.size() - f, size_t(1 + rng() % size_t(max_chunk)));
                r.tokens = std::span<const int32_t>(q.prompt).subspan(f, n);
                r.all_logits = true;
                prefill = true;
            } else {
                r.tokens = std::span<const int32_t>(q.continuation).subspan(f - q.prompt.size(), 1);
                decode = true;
            }
            step.push_back(r);
            who.push_back(i);
        }
        const auto logits = pool.step(step);
        ++out.steps;
        if (prefill && decode) ++out.mixed_steps;
        for (size_t k = 0; k < step.size(); ++k) {
            const int i = who[k];
            auto& dst = out.logits[static_cast<size_t>(i)];
            dst.insert(dst.end(), logits[k].begin(), logits[k].end());
            fed[static_cast<size_t>(i)] += step[k].tokens.size();
            const ScenarioSequence& q = seqs[static_cast<size_t>(i)];
            if (fed[static_cast<size_t>(i)] == q.prompt.size() + q.continuation.size()) {
                owner[static_cast<size_t>(step[k].slot)] = -1;
                ++finished;
            }
        }
    }
    out.replayed = pool.decode_steps_replayed();
    return out;
}

// Worst relative L2 over matching rows of two [rows x n_vocab] runs, and
// whether every row's argmax agrees; -1 when the shapes differ.
inline double worst_rel_l2(const std::vector<float>& a, const std::vector<float>& b, int64_t n_vocab,
                           bool* same_argmax) {
    if (a.size() != b.size()) return -1;
    double worst = 0;
    *same_argmax = true;
    for (size_t r = 0; r < a.size() / size_t(n_vocab); ++r) {
        const float* x = a.data() + r * size_t(n_vocab);
        const float* y = b.data() + r * size_t(n_vocab);
        double d = 0, n = 0;
        for (int64_t j = 0; j < n_vocab; ++j) {
            d += (double(x[j]) - y[j]) * (double(x[j]) - y[j]);
            n += double(y[j]) * y[j];
        }
        worst = std::max(worst, n > 0 ? std::sqrt(d / n) : (d > 0 ? INFINITY : 0.0));
        if (std::max_element(x, x + n_vocab) - x != std::max_element(y, y + n_vocab) - y) *same_argmax = false;
    }
    return worst;
}

}  // namespace ds4::test

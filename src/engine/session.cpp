#include "engine/session.h"

#include <algorithm>

#include "common/error.h"
#include "engine/prefix_cache.h"

namespace ds4 {

namespace {
SessionOptions checked(const SessionOptions& o) {
    if (o.n_ctx < 1) throw Error("the context size must be at least 1 token.");
    if (o.prefill_chunk < 1) throw Error("the prefill chunk must be at least 1 token.");
    if (o.prefill_window < 1) throw Error("the prefill window must be at least 1 chunk.");
    return o;
}
}  // namespace

Session::Session(const Model& model, Backend& backend, const SessionOptions& opts)
    : opts_(checked(opts)), pool_(model, backend, 1, opts.n_ctx, opts.replay_decode, opts.route) {}

void Session::reset() {
    pool_.reset(0);
    tokens_.clear();
}

bool Session::try_rewind(int64_t n) {
    if (!pool_.try_rewind(0, n)) return false;
    tokens_.resize(static_cast<size_t>(n));
    return true;
}

int64_t Session::reuse_prefix(std::span<const int32_t> prompt, PrefixCache* cache) {
    size_t common = 0;
    while (common < tokens_.size() && common < prompt.size() && tokens_[common] == prompt[common]) ++common;
    if (common == prompt.size() && common > 0) --common;  // evaluate at least one token for its logits
    // What the live sequence keeps: the common prefix where the model's
    // caches can resume there, else nothing.
    const int64_t live = pool_.can_rewind(0, static_cast<int64_t>(common)) ? static_cast<int64_t>(common) : 0;
    if (cache) {
        if (const SessionSnapshot* snap = cache->find(prompt, live)) {
            restore(*snap);
            cache->stats_.tokens_reused += static_cast<uint64_t>(snap->n_past());
            return snap->n_past();
        }
    }
    if (live == 0) {
        reset();
        return 0;
    }
    try_rewind(live);
    return live;
}

SessionSnapshot Session::snapshot() const { return SessionSnapshot{pool_.snapshot(0), tokens_}; }

void Session::restore(const SessionSnapshot& snap) {
    pool_.restore(0, snap.state);
    tokens_ = snap.tokens;
}

std::vector<float> Session::decode(int32_t token, int best, Candidates* out) {
    const SeqStep step{0, std::span<const int32_t>(&token, 1), false, best};
    std::vector<Candidates> got;
    std::vector<float> row = advance(step.tokens, [&] {
        return std::move(pool_.step(std::span<const SeqStep>(&step, 1), {}, &got).front());
    });
    *out = std::move(got.front());
    return row;
}

std::vector<float> Session::eval(std::span<const int32_t> tokens, bool all_logits,
                                 const std::function<void(int64_t, int64_t)>& progress) {
    if (tokens.empty()) return {};
    return advance(tokens, [&] {
        return pool_.prefill(0, tokens, opts_.prefill_chunk, opts_.prefill_window, all_logits, progress);
    });
}

std::vector<float> Session::advance(std::span<const int32_t> tokens, const std::function<std::vector<float>()>& run) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (n_past() + n > opts_.n_ctx)
        throw Error("the context of " + std::to_string(opts_.n_ctx) + " tokens cannot hold " +
                    std::to_string(n_past() + n) + " tokens; raise --ctx.");
    std::vector<float> out;
    try {
        out = run();
    } catch (...) {
        // A failed route leaves the slot at the chunks it finished (or at
        // nothing where the model cannot rewind there): hold what it holds.
        tokens_ = pool_.tokens(0);
        throw;
    }
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    return out;
}

}  // namespace ds4

// A session: one model, one backend, one context. Feeds tokens through the
// model in prefill chunks and keeps the position; the same logits come out
// whatever the chunk size.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "models/family.h"

namespace ds4 {

struct SessionOptions {
    int64_t n_ctx = 4096;
    int64_t prefill_chunk = 4096;
};

class Session {
public:
    Session(const Model& model, Backend& backend, const SessionOptions& opts);

    // Evaluates `tokens` after what the session already holds. Returns the
    // logits of every new position ([n x n_vocab], row-major) when
    // all_logits, else of the last one. `progress(done, total)` is called
    // after each chunk.
    std::vector<float> eval(std::span<const int32_t> tokens, bool all_logits,
                            const std::function<void(int64_t, int64_t)>& progress = {});

    int64_t n_past() const { return n_past_; }
    int64_t n_ctx() const { return opts_.n_ctx; }
    int64_t n_vocab() const { return model_.info().n_vocab; }
    void reset() { n_past_ = 0; }  // the cache is overwritten from position 0
    // Forgets every position from n on (n <= n_past); the next eval
    // overwrites them. Used to reuse a shared prompt prefix.
    void rewind(int64_t n);
    const Model& model() const { return model_; }
    uint64_t state_bytes() const { return state_->bytes(); }

private:
    const Model& model_;
    Backend& backend_;
    SessionOptions opts_;
    std::unique_ptr<ModelState> state_;
    int64_t n_past_ = 0;
};

}  // namespace ds4

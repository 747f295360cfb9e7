#include "runtime/session.h"

#include <algorithm>

#include "common/error.h"

namespace ds4 {

Session::Session(const Model& model, Backend& backend, const SessionOptions& opts)
    : model_(model), backend_(backend), opts_(opts) {
    if (opts_.n_ctx < 1) throw Error("the context size must be at least 1 token.");
    if (opts_.prefill_chunk < 1) throw Error("the prefill chunk must be at least 1 token.");
    state_ = model_.new_state(backend_, opts_.n_ctx);
}

void Session::rewind(int64_t n) {
    if (n < 0 || n > n_past_)
        throw Error("cannot rewind a session of " + std::to_string(n_past_) + " tokens to " + std::to_string(n) + ".");
    n_past_ = n;
}

std::vector<float> Session::eval(std::span<const int32_t> tokens, bool all_logits,
                                 const std::function<void(int64_t, int64_t)>& progress) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (n == 0) return {};
    if (n_past_ + n > opts_.n_ctx)
        throw Error("the context of " + std::to_string(opts_.n_ctx) + " tokens cannot hold " + std::to_string(n_past_ + n) +
                    " tokens; raise --ctx.");
    const int64_t V = model_.info().n_vocab;
    std::vector<float> out(static_cast<size_t>((all_logits ? n : 1) * V));
    for (int64_t done = 0; done < n;) {
        const int64_t m = std::min(opts_.prefill_chunk, n - done);
        const bool last_chunk = done + m == n;
        // Only the final chunk's last row matters unless every row is wanted.
        Tensor logits = model_.forward(backend_, *state_, tokens.data() + done, m, n_past_, all_logits);
        if (all_logits) {
            backend_.download(logits, out.data() + done * V);
        } else if (last_chunk) {
            backend_.download(logits, out.data());
        }
        n_past_ += m;
        done += m;
        if (progress) progress(done, n);
    }
    return out;
}

}  // namespace ds4

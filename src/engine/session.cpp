#include "engine/session.h"

#include <algorithm>
#include <cstdio>

#include "common/error.h"
#include "common/log.h"

namespace ds4 {

Session::Session(const Model& model, Backend& backend, const SessionOptions& opts)
    : model_(model), backend_(backend), opts_(opts) {
    if (opts_.n_ctx < 1) throw Error("the context size must be at least 1 token.");
    if (opts_.prefill_chunk < 1) throw Error("the prefill chunk must be at least 1 token.");
    state_ = model_.new_state(backend_, opts_.n_ctx);
}

void Session::reset() {
    decode_recording_.reset();
    decode_logits_ = Tensor{};
    state_ = model_.new_state(backend_, opts_.n_ctx);
    n_past_ = 0;
    tokens_.clear();
}

bool Session::try_rewind(int64_t n) {
    if (n < 0 || n > n_past_ || !state_->can_rewind(n, n_past_)) return false;
    n_past_ = n;
    tokens_.resize(static_cast<size_t>(n));
    return true;
}

int64_t Session::reuse_prefix(std::span<const int32_t> prompt) {
    size_t common = 0;
    while (common < tokens_.size() && common < prompt.size() && tokens_[common] == prompt[common]) ++common;
    if (common == prompt.size() && common > 0) --common;  // evaluate at least one token for its logits
    if (!try_rewind(static_cast<int64_t>(common))) {
        reset();  // the model's caches cannot resume there: evaluate from the start
        return 0;
    }
    return static_cast<int64_t>(common);
}

uint64_t SessionSnapshot::bytes() const {
    uint64_t b = 0;
    for (const auto& t : tensors) b += t.size() * sizeof(float);
    return b;
}

SessionSnapshot Session::snapshot() const {
    SessionSnapshot snap;
    snap.n_past = n_past_;
    snap.tokens = tokens_;
    for (Tensor* t : state_->tensors()) {
        snap.tensors.emplace_back(static_cast<size_t>(t->size()));
        backend_.download(*t, snap.tensors.back().data());
    }
    return snap;
}

void Session::restore(const SessionSnapshot& snap) {
    const std::vector<Tensor*> ts = state_->tensors();
    if (ts.size() != snap.tensors.size())
        throw Error("the snapshot does not belong to this session (it holds " + std::to_string(snap.tensors.size()) +
                    " tensors, the session " + std::to_string(ts.size()) + ").");
    for (size_t i = 0; i < ts.size(); ++i)
        if (static_cast<size_t>(ts[i]->size()) != snap.tensors[i].size())
            throw Error("the snapshot does not belong to this session (tensor " + std::to_string(i) + " differs in size).");
    for (size_t i = 0; i < ts.size(); ++i) backend_.upload(*ts[i], snap.tensors[i].data());
    n_past_ = snap.n_past;
    tokens_ = snap.tokens;
}

std::vector<float> Session::eval(std::span<const int32_t> tokens, bool all_logits,
                                 const std::function<void(int64_t, int64_t)>& progress) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (n == 0) return {};
    if (n_past_ + n > opts_.n_ctx)
        throw Error("the context of " + std::to_string(opts_.n_ctx) + " tokens cannot hold " + std::to_string(n_past_ + n) +
                    " tokens; raise --ctx.");
    const int64_t V = model_.info().n_vocab;
    for (const int32_t t : tokens)
        if (t < 0 || t >= V)
            throw Error("token id " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(V) +
                        " tokens.");
    std::vector<float> out(static_cast<size_t>((all_logits ? n : 1) * V));
    for (int64_t done = 0; done < n;) {
        const int64_t m = std::min(opts_.prefill_chunk, n - done);
        const bool last_chunk = done + m == n;
        // Only the final chunk's last row matters unless every row is wanted.
        const bool replay = m == 1 && !all_logits && opts_.replay_decode && !replay_refused_ && model_.replayable_decode() &&
                            backend_.can_capture();
        const Tensor logits = replay ? replayed_decode(tokens[done]) : forward_chunk(tokens.data() + done, m, all_logits);
        if (all_logits) {
            backend_.download(logits, out.data() + done * V);
        } else if (last_chunk) {
            backend_.download(logits, out.data());
        }
        tokens_.insert(tokens_.end(), tokens.begin() + done, tokens.begin() + done + m);
        n_past_ += m;
        done += m;
        if (progress) progress(done, n);
    }
    return out;
}

Tensor Session::forward_chunk(const int32_t* tokens, int64_t n, bool all_logits) {
    StepInputs in;
    in.tokens = tokens;
    in.n = n;
    in.pos0 = n_past_;
    in.token_ids = backend_.ints(tokens, n);
    std::vector<int32_t> pos(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(n_past_ + i);
    in.positions = backend_.ints(pos.data(), n);
    return model_.forward(backend_, *state_, in, all_logits);
}

Tensor Session::replayed_decode(int32_t token) {
    if (!decode_inputs_.token_ids.data) {
        decode_inputs_.n = 1;
        decode_inputs_.token_ids = backend_.alloc_ints(1);
        decode_inputs_.positions = backend_.alloc_ints(1);
    }
    const int32_t pos = static_cast<int32_t>(n_past_);
    backend_.upload_ints(decode_inputs_.token_ids, &token);
    backend_.upload_ints(decode_inputs_.positions, &pos);
    if (!decode_recording_) {
        // Host copies are valid only while recording; a replayable model
        // reads the step's values from the backend arrays alone.
        decode_inputs_.tokens = &token;
        decode_inputs_.pos0 = n_past_;
        backend_.begin_capture();
        try {
            decode_logits_ = model_.forward(backend_, *state_, decode_inputs_, false);
        } catch (const Error& e) {
            // Some op of this model cannot be recorded (e.g. experts whose rows
            // the device kernels cannot read go through a host-grouped path).
            // Nothing ran while recording, so the step simply runs op by op,
            // now and for the rest of the session.
            try {
                backend_.end_capture();
            } catch (const Error&) {
            }
            decode_inputs_.tokens = nullptr;
            decode_logits_ = Tensor{};
            replay_refused_ = true;
            replay_refused_reason_ = e.what();
            log_warning(std::string("decode steps run op by op (") + e.what() + ")");
            return forward_chunk(&token, 1, false);
        } catch (...) {
            try {
                backend_.end_capture();
            } catch (...) {
            }
            decode_inputs_.tokens = nullptr;
            throw;
        }
        decode_recording_ = backend_.end_capture();
        decode_inputs_.tokens = nullptr;
    }
    backend_.replay(decode_recording_);
    ++steps_replayed_;
    return decode_logits_;
}

}  // namespace ds4

// A session: one sequence on one model and backend. Feeds tokens through the
// model in prefill chunks and keeps the position and the tokens it holds;
// the same logits come out whatever the chunk size. It is one slot of a
// SlotPool of one, so a session and a batch of many sequences run the same
// step code.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/downstream.h"
#include "engine/slot_pool.h"

namespace ds4 {

class PrefixCache;

struct SessionOptions {
    int64_t n_ctx = 4096;
    int64_t prefill_chunk = 4096;
    // Record the one-token forward pass once and replay it for every decode
    // step where the backend and the model allow it (CUDA graphs).
    bool replay_decode = true;
    // Prefill chunks in flight along a pipeline route (--dist-prefill-window):
    // this stage computes the next chunk while later stages work on earlier
    // ones. 1, or no route: one chunk at a time. (After replay_decode, so
    // SessionOptions{ctx, chunk, replay} keeps its meaning.)
    int prefill_window = 1;
    // The pipeline stages after this process's layer slice (none: the model
    // is whole here). Set by the engine.
    std::shared_ptr<Downstream> route;
};

// A copy of a session's whole state in host memory.
struct SessionSnapshot {
    SlotSnapshot state;
    std::vector<int32_t> tokens;  // what the session held
    int64_t n_past() const { return state.n_past; }
    uint64_t bytes() const { return state.bytes(); }
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

    // One token after what the session holds, like eval(), but the caller
    // takes the `best` best tokens of its logits (SeqStep::best) where the
    // session can give them (*out, and the returned row is empty); else the
    // row as eval() returns it and *out is empty.
    std::vector<float> decode(int32_t token, int best, Candidates* out);

    int64_t n_past() const { return pool_.n_past(0); }
    int64_t n_ctx() const { return opts_.n_ctx; }
    int64_t n_vocab() const { return pool_.n_vocab(); }
    // Starts over at position 0.
    void reset();
    // Forgets every position from n on, so the next eval continues at n;
    // used to reuse a shared prompt prefix. Returns false (and changes
    // nothing) when the model's state cannot resume there, e.g. ring caches.
    bool try_rewind(int64_t n);

    // The tokens the session holds, in order: everything eval() was given
    // since the last reset (n_past() of them).
    const std::vector<int32_t>& tokens() const { return tokens_; }
    // Prefix reuse: keeps the longest prefix of `prompt` that the session
    // holds and can resume from (rewinding where the model's caches allow,
    // starting over where they do not) and returns its length. At least one
    // token of a non-empty prompt is always left to evaluate, since its
    // logits are what the caller wants next. With a prefix cache, a
    // snapshot that keeps more of the prompt than the live sequence can is
    // restored instead.
    int64_t reuse_prefix(std::span<const int32_t> prompt, PrefixCache* cache = nullptr);

    // Copies the whole state (caches of every kind, position, tokens) to
    // host memory and back; after restore the session continues exactly as
    // it would have from the snapshot, whatever was evaluated in between.
    SessionSnapshot snapshot() const;
    void restore(const SessionSnapshot& snap);
    uint64_t state_bytes() const { return pool_.state_bytes(); }

    // How one-token steps ran: replayed from the recording, or op by op
    // because recording was refused (then decode_replay_refused() says
    // why). Tests read these to prove the path they mean to check ran.
    int64_t decode_steps_replayed() const { return pool_.decode_steps_replayed(); }
    const std::string& decode_replay_refused() const { return pool_.decode_replay_refused(); }

private:
    // `tokens` after what the session holds through `run` (the pool's step
    // or prefill): the context checked first, the held tokens kept in step
    // with the pool whether it succeeds or fails.
    std::vector<float> advance(std::span<const int32_t> tokens, const std::function<std::vector<float>()>& run);

    SessionOptions opts_;
    SlotPool pool_;
    std::vector<int32_t> tokens_;
};

}  // namespace ds4

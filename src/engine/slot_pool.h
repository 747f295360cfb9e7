// Sequence slots sharing one model state: the unit of batching. step() runs
// ONE forward pass over rows of many sequences at once (prefill chunks and
// single-token decodes mixed), so the weights are read once per step for
// every sequence in it. A Session is one slot of a pool of one; the server
// and ds4-bench --parallel run many slots.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/downstream.h"
#include "engine/token_history.h"
#include "models/family.h"
#include "sampling/candidates.h"

namespace ds4 {

// One sequence's part of a step: `tokens` continue the sequence in `slot`.
struct SeqStep {
    int slot = 0;
    std::span<const int32_t> tokens;
    bool all_logits = false;  // logits of every token, else of the last one only
    // > 0 (and not all_logits): the step may return this many of the last
    // row's best tokens (Candidates) instead of the row, which then stays
    // on the backend: 4 bytes a token of the vocabulary less to copy and
    // scan per sequence and step. A pool whose logits come from a route
    // returns the row (the caller samples from whichever it got).
    int best = 0;
};

// A copy of one slot's state in host memory.
// A slot's state copied into backend memory at one step (SlotPool::stage):
// the slot may go on at once, and another thread downloads the copy into a
// SlotSnapshot (SnapshotCopier) while the steps continue.
struct StagedSnapshot {
    int64_t n_past = 0;
    std::vector<int32_t> tokens;   // the n_past tokens the slot held
    std::vector<Tensor> tensors;   // copies of the slot's state tensors, in slot_tensors order
    uint64_t bytes() const;
};

struct SlotSnapshot {
    int64_t n_past = 0;
    std::vector<StateFloats> tensors;
    std::vector<int32_t> tokens;  // the n_past tokens the slot held
    // On a coordinator, the later stages' parts in route order (empty: this
    // process's slice only; restoring then replays through the route).
    std::vector<RouteStatePart> route;
    uint64_t bytes() const;
};

class SlotPool {
public:
    // Record a forward pass of single-token decodes once per batch size and
    // replay it where the model and the backend allow (CUDA graphs). With a
    // downstream (a pipeline route after this process's layer slice), each
    // step's hidden rows continue there and its logits come back.
    SlotPool(const Model& model, Backend& backend, int n_slots, int64_t n_ctx, bool replay_decode = true,
             std::shared_ptr<Downstream> downstream = nullptr);

    int n_slots() const { return static_cast<int>(n_past_.size()); }
    int64_t n_ctx() const { return n_ctx_; }
    int64_t n_vocab() const { return model_.info().n_vocab; }
    int64_t n_past(int slot) const;
    // Forgets the sequence in `slot`: its next step starts at position 0.
    // Nothing is cleared: a sequence only ever reads state its own earlier
    // positions wrote.
    void reset(int slot);
    // Forgets positions from n on in `slot` when the model's caches can
    // resume there (ring caches cannot); false changes nothing.
    bool try_rewind(int slot, int64_t n);
    // Whether try_rewind(slot, n) would succeed (changes nothing).
    bool can_rewind(int slot, int64_t n) const;
    // Slot `dst` takes the first n positions slot `src` holds (a copy in
    // backend memory, no host round trip): many requests with one system
    // prompt evaluate it once. Only where src's state can resume at n
    // (can_rewind) and no route follows this pool (the later stages would
    // need the same copy); false changes nothing.
    bool fork(int src, int dst, int64_t n);
    // Whether fork() can succeed in this pool at all (no route after it).
    bool forks() const { return downstream_ == nullptr; }
    // Whether a slot can resume at any earlier position (a plain KV cache),
    // not only where it ends (DeepSeek V4's rings).
    bool can_rewind_anywhere() const { return state_->can_rewind(0, 1); }

    // One forward pass over every request's tokens (at most one request per
    // slot). Returns each request's logits, [rows x n_vocab] row-major, in
    // request order. Throws ds4::Error (context full, token outside the
    // vocabulary, bad slot) before anything runs.
    //
    // A pool on a stage (a model loaded with a layer slice) that does not
    // start at block 0 takes the previous stage's hidden rows for every row
    // of the step, in request order ([rows x hidden_cols()]); a stage without
    // the last block returns each request's hidden rows (all of them,
    // [tokens x hidden_cols()]) instead of logits.
    //
    // With `best`, it gets one entry per request: the request's candidates
    // where SeqStep::best asked and the pool could (its logits vector then
    // stays empty), else an empty entry beside the logits.
    std::vector<std::vector<float>> step(std::span<const SeqStep> requests, std::span<const float> hidden_in = {},
                                         std::vector<Candidates>* best = nullptr);

    // Evaluates `tokens` after what `slot` holds, `chunk` tokens per step,
    // and returns the logits of every token when all_logits, else of the
    // last one. On a pool that embeds and has a route after it, up to
    // `window` chunks are in flight along the route at once: this stage
    // computes chunk i+1 while the next works on chunk i (pipelined
    // prefill). The same values as step() chunk by chunk. On a failure the
    // slot holds the chunks the whole route finished (or, where the model
    // cannot rewind there and more than one chunk was in flight, nothing). `progress(done, total)` after each
    // chunk the route finished.
    std::vector<float> prefill(int slot, std::span<const int32_t> tokens, int64_t chunk, int window, bool all_logits,
                               const std::function<void(int64_t, int64_t)>& progress = {});
    bool embeds() const { return model_.info().layers.has_embedding(); }
    // Whether steps return logits: the local model holds the head, or a
    // route after it does (or runs the last blocks for the head here).
    bool has_head() const { return local_head() || downstream_ != nullptr; }
    // The local forward pass ends in the head: this process runs the last
    // block and owns the head.
    bool local_head() const { return model_.info().layers.head_follows_blocks(model_.info().n_layer); }
    // This process owns the head while the route after it runs the last
    // blocks (a coordinator with --layers 0:B,output): the route returns
    // the final hidden rows, and the head runs here on them.
    bool head_after_route() const { return model_.info().layers.head_apart(model_.info().n_layer); }
    // The tokens slot `slot` holds and the hash of its first n (a pipeline
    // stage checks them before continuing a sequence).
    const std::vector<int32_t>& tokens(int slot) const;
    uint64_t prefix_hash(int slot, int64_t n) const;
    int64_t hidden_cols() const { return model_.hidden_cols(); }

    // With a route after this pool (a coordinator), the snapshot gathers
    // every stage's part and restore() hands each its part back; a stage
    // that refuses (the route changed) makes the next step replay.
    SlotSnapshot snapshot(int slot) const;
    void restore(int slot, const SlotSnapshot& snap);
    // The slot's state copied in backend memory (device to device on CUDA,
    // finished when this returns), for a snapshot downloaded off this
    // thread; nothing when a route follows this pool (its snapshot gathers
    // the stages' parts) or the backend lacks `bytes_free` spare memory
    // after the copy.
    std::optional<StagedSnapshot> stage(int slot, uint64_t bytes_free) const;
    // The bytes of the slot's state a snapshot holds now.
    uint64_t snapshot_bytes(int slot) const;
    uint64_t state_bytes() const { return state_->bytes(); }

    // Steps that ran as a replayed recording, and why recording was last
    // refused ("" when it never was; a refusal holds for that many rows
    // only): tests read these to prove which path ran.
    int64_t decode_steps_replayed() const { return steps_replayed_; }
    const std::string& decode_replay_refused() const { return replay_refused_; }

private:
    // A recorded decode step of n rows: its inputs at fixed backend
    // addresses (rewritten before each replay: ids, and a later stage's
    // hidden rows) and its output tensor (logits, or a stage's hidden rows),
    // all owned by the recording.
    // Where the backend has page-locked memory (CUDA), the inputs are one
    // block written on the host and copied in by the recording itself, and
    // a stage's hidden rows out are copied out by it too: a replay costs one
    // launch and one wait, not five uploads and a download.
    struct Recording {
        IntArray tokens, positions, slots, logit_rows;
        Tensor hidden;  // a later stage's input rows
        std::shared_ptr<void> graph;
        Tensor logits;
        Tensor inputs;                        // the device block the ids and hidden rows above are views of
        std::shared_ptr<uint8_t> staged_in;   // its page-locked host copy (null: uploads one by one)
        std::shared_ptr<uint8_t> staged_out;  // a stage's hidden rows out, copied by the replay (null: downloaded)
    };
    void check_slot(int slot) const;
    std::vector<std::vector<float>> run_step(std::span<const SeqStep> requests, std::span<const float> hidden_in,
                                             std::vector<Candidates>* best);
    // The candidates of the logits rows `rows` of `logits` (the k of each
    // request i in `ks`), computed on the backend; only they are copied.
    void best_of_rows(const Tensor& logits, const std::vector<int32_t>& rows, const std::vector<int>& ks,
                      std::vector<Candidates*>& out);
    // This stage's output rows (logits, or hidden rows for the next stage),
    // still in the backend's memory: the caller downloads what it needs
    // (a decode step of N sequences takes each one's row straight into its
    // own vector, without a flat copy in between).
    struct LocalRows {
        Tensor rows;
        int64_t cols = 0;
        const float* staged = nullptr;  // the same rows in page-locked host memory once the backend synchronizes
        bool empty() const { return rows.data == nullptr || rows.rows == 0; }
        std::vector<float> download(Backend& backend) const;
        // Rows [r0, r0 + n) into `host`.
        void copy_rows(Backend& backend, int64_t r0, int64_t n, float* host) const;
    };
    // This process's part of a step: checks, the forward pass over the local
    // slice, its output rows ([rows x cols]: logits rows, or every row's
    // hidden state when the head is elsewhere). Changes no position.
    LocalRows run_local(std::span<const SeqStep> requests, std::span<const float> hidden_in);
    // The step's tokens now belong to their slots.
    void commit(std::span<const SeqStep> requests);
    // What the route returned for one sequence, as logits: with the head
    // here (head_after_route()), the head over its final hidden rows
    // [k x hidden_cols()]; else the route's logits as they came.
    std::vector<float> route_logits(std::vector<float> from_route);
    // prefill() along the route with a window of chunks in flight, from
    // tokens[*done]; *done and `out` grow as the route finishes chunks. On
    // a failure the slot is rolled back to the finished chunks (or reset,
    // with what it held in *lost) and the error rethrown.
    void prefill_window(int slot, std::span<const int32_t> tokens, int64_t chunk, int window, bool all_logits,
                        std::vector<float>* out, int64_t* done, std::vector<int32_t>* lost,
                        const std::function<void(int64_t, int64_t)>& progress);
    void replay_history(int slot);
    LocalRows replayed(const std::vector<int32_t>& tokens, const std::vector<int32_t>& positions,
                       const std::vector<int32_t>& slots, const std::vector<int32_t>& logit_rows,
                       std::span<const float> hidden_in, bool* ran);
    Recording record_inputs(int64_t n);

    const Model& model_;
    Backend& backend_;
    int64_t n_ctx_;
    bool replay_decode_;
    std::unique_ptr<ModelState> state_;
    std::vector<int64_t> n_past_;
    std::vector<TokenHistory> history_;  // per slot: the n_past tokens it holds
    std::shared_ptr<Downstream> downstream_;
    std::vector<std::string> route_refused_;  // per slot: why the route refused the last restore ("" none)
    bool replaying_ = false;  // inside replay_history: a second loss is an error, not another replay
    std::map<int64_t, Recording> recordings_;  // by rows
    std::set<int64_t> refused_rows_;            // row counts whose recording failed: op by op from then on
    std::string replay_refused_;                // the latest refusal's reason
    int64_t steps_replayed_ = 0;
};

}  // namespace ds4

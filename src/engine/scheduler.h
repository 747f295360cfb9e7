// Continuous batching: requests arrive at any time (from any thread), wait
// in a bounded queue for a free sequence slot, and every step runs ONE
// forward pass over all of them: the next prefill chunk of each request
// still reading its prompt and one token of each request that is
// generating, so a long prompt never stalls running streams and the weights
// are read once per step for everyone. Each request samples, detokenizes
// and applies its stop strings as generate() does for one session, so a
// request's tokens are the ones it gets alone.
//
// A new request takes the free slot whose held tokens share the longest
// prefix with its prompt where the slot can resume there, or a snapshot from
// the RAM prefix cache where that keeps more (stateless clients resend the
// whole conversation every turn). Before its first chunk it also takes a
// longer prefix from another running request's slot (SlotPool::fork), and
// waits for an earlier request still reading that prefix instead of
// evaluating it a second time: many clients with one system prompt, arriving
// together, read it once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "engine/generate.h"
#include "engine/prefix_cache.h"
#include "engine/slot_pool.h"
#include "engine/snapshot_copier.h"

namespace ds4 {

class Tokenizer;

struct SchedulerOptions {
    int n_slots = 4;                  // sequences decoded together (--parallel)
    int64_t n_ctx = 4096;             // positions per sequence
    int64_t prefill_chunk = 512;      // prompt tokens per request per step
    // Tokens per forward pass (--batch-size): one for each request that is
    // generating, then prefill chunks in arrival order while the rest lasts
    // (the earliest prefilling request always gets its chunk; one that
    // others wait for may take the rest of the budget). A bound on
    // the step keeps running streams' inter-token latency flat, and the
    // order lets the first requests' prompts finish first instead of all
    // of them finishing together at the end.
    int64_t batch_tokens = 2048;
    size_t max_queue = 64;            // requests waiting for a slot (--max-queue)
    uint64_t prefix_cache_bytes = 0;  // RAM for prompt snapshots (0: none)
    std::optional<SnapshotDiskOptions> disk_cache;  // --kv-disk-dir: snapshots on disk too
    std::shared_ptr<Downstream> route;  // pipeline stages after this slice (set by the engine)
};

// The queue is full: answer 429 and let the client retry.
class QueueFull : public Error {
public:
    using Error::Error;
};

struct Request {
    std::vector<int32_t> prompt;
    GenerateOptions options;  // max_tokens, sampling, stop strings, eval_end_token
    // Called on the scheduler's thread: whole-character pieces as they are
    // generated (false cancels), then the result exactly once, whatever the
    // reason (cancel() and a failed step included).
    std::function<bool(std::string_view)> on_text;
    std::function<void(const GenerateResult&)> on_done;
    // options.top_logprobs >= 0: each sampled token's log probabilities,
    // on the scheduler's thread, before the text that token completes
    // reaches on_text (a stream can attach them to that piece).
    std::function<void(const SampledLogprobs&)> on_logprobs;
    // Called on the scheduler's thread when the request takes a slot, with
    // the prompt tokens it reuses (a stream can then report them before the
    // first token). Not called for a request cancelled while queued.
    std::function<void(int64_t cached_tokens)> on_admit;
};

struct SchedulerStats {
    int active = 0;         // requests holding a slot
    size_t queued = 0;      // waiting for one
    uint64_t steps = 0;     // forward passes
    uint64_t mixed_steps = 0;  // passes with both prefill chunks and decodes
    uint64_t completed = 0;
    uint64_t cached_tokens = 0;  // prompt tokens reused instead of evaluated
    uint64_t prefill_tokens = 0;  // prompt tokens evaluated
    uint64_t decode_tokens = 0;   // tokens fed while generating (one per decode row)
    uint64_t slot_hits = 0;       // requests that resumed the prefix their slot held
    uint64_t snapshot_hits = 0;   // requests that resumed a prefix-cache snapshot in RAM
    uint64_t disk_hits = 0;       // requests that resumed a snapshot read from the disk tier
    uint64_t fork_hits = 0;       // requests that took a prefix another running request had evaluated
    std::optional<SnapshotDiskStats> disk;  // the disk tier's files and traffic (--kv-disk-dir)
    int slots = 0;                // sequence slots in all
    // Where the scheduler's thread spends its time (seconds, wall clock):
    // the forward passes (those with a prefill chunk also on their own),
    // admitting requests (slot choice and snapshot restores), copying
    // prompt snapshots out for the prefix cache, and the longest step. A
    // stream's inter-token latency is the step time of every step it
    // waits through, so what is not a forward pass shows up here.
    double forward_seconds = 0;
    double prefill_forward_seconds = 0;
    double admit_seconds = 0;
    double snapshot_seconds = 0;
    uint64_t snapshots = 0;
    uint64_t snapshots_aside = 0;  // of which were downloaded off the scheduler's thread (SnapshotCopier)
    double longest_step_seconds = 0;
};

class Scheduler {
public:
    Scheduler(const Model& model, Backend& backend, const Tokenizer& tokenizer, const SchedulerOptions& options);
    ~Scheduler();

    // Queues a request; returns its id. Throws ds4::Error (one sentence)
    // for an empty prompt or one the context cannot hold with a token to
    // spare, or a bad sampling parameter; QueueFull when max_queue requests
    // already wait. Thread-safe.
    uint64_t submit(Request request);
    // Ends a queued or running request at the next step (its on_done sees
    // StopReason::cancelled). Unknown or finished ids are ignored. Thread-safe.
    void cancel(uint64_t id);
    // Cancels every queued and running request (shutdown). Thread-safe.
    void cancel_all();

    // One forward pass over every active request, after admitting queued
    // ones into free slots; false (and nothing ran) when there was no work.
    // Call from one thread.
    bool step();
    // Steps until `stop` returns true, waiting (up to `idle_wait`) for work
    // when there is none.
    void serve(const std::function<bool()>& stop,
               std::chrono::milliseconds idle_wait = std::chrono::milliseconds(50));

    SchedulerStats stats() const;
    const PrefixCache* prefix_cache() const { return cache_ ? &*cache_ : nullptr; }

private:
    struct Active;
    void admit();
    // Forks a request that has not started from a running one whose slot
    // holds more of its prompt, or makes it wait for an earlier request
    // still reading a long enough part of its prompt: returns that one's
    // index in `order` (*until: the position it should reach first), or -1.
    int fork_or_wait(Active& a, const std::vector<Active*>& order, int64_t* until);
    void announce(Active& a);
    void finish(Active& a, StopReason reason);
    void after_logits(Active& a, std::span<const float> logits, const Candidates& best);

    const Model& model_;
    const Tokenizer& tokenizer_;
    SchedulerOptions opts_;
    SlotPool pool_;
    std::optional<PrefixCache> cache_;
    std::unique_ptr<SnapshotCopier> copier_;  // with cache_: prompt snapshots downloaded off this thread
    void store_copied(bool wait);             // the copier's finished snapshots into cache_
    std::vector<std::vector<int32_t>> held_;     // per slot: the tokens its state holds
    std::vector<std::unique_ptr<Active>> slot_;  // per slot: the request in it, or null

    mutable std::mutex mu_;
    std::condition_variable work_;
    struct Queued {
        uint64_t id;
        Request request;
    };
    std::deque<Queued> queue_;
    std::vector<uint64_t> cancelled_;
    bool cancel_all_ = false;
    uint64_t next_id_ = 1;
    SchedulerStats stats_;
};

}  // namespace ds4

#include "engine/scheduler.h"

#include <algorithm>

#include "engine/stop_strings.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace ds4 {

namespace {
using Clock = std::chrono::steady_clock;
// Backend memory for prompt snapshots staged at once (SnapshotCopier): a
// burst of long prompts finishing together (16 of Qwen3-30B's ~490 MB at
// 2.5k tokens; with 2 GiB, 31 of an H100 load's 72 found it full); past it,
// or past what the backend has free, a snapshot is copied on this thread.
// And what a staging must leave free of the backend's memory (the next
// steps' activations).
constexpr uint64_t kMaxStagedBytes = uint64_t{8} << 30;
constexpr uint64_t kStagingSpareBytes = uint64_t{1} << 30;
double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The length of the common prefix of a and b, at most cap.
int64_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int64_t cap) {
    int64_t n = 0;
    const int64_t end = std::min<int64_t>({cap, static_cast<int64_t>(a.size()), static_cast<int64_t>(b.size())});
    while (n < end && a[static_cast<size_t>(n)] == b[static_cast<size_t>(n)]) ++n;
    return n;
}
}  // namespace

// A request holding a slot.
struct Scheduler::Active {
    uint64_t id = 0;
    Request req;
    int slot = 0;
    int64_t fed = 0;           // prompt tokens the slot holds (the reused prefix, then each chunk)
    Sampler sampler;
    ReplyText reply;
    GenerateResult result;
    int32_t next = -1;         // the token the next step feeds (the last one sampled)
    bool end_pending = false;  // `next` is the end token: feed it, then finish
    bool cancelled = false;    // by cancel() or the text callback
    bool announced = false;    // on_admit called: the request took its first chunk
    std::vector<float> banned;  // the logits with end tokens banned (ignore_eos)
    Clock::time_point started, prompt_done;

    Active(uint64_t i, Request r, int s, const Tokenizer& tok)
        : id(i), req(std::move(r)), slot(s), sampler(req.options.sampling), reply(tok, req.options.stop),
          started(Clock::now()) {}
    bool prefilling() const { return fed < static_cast<int64_t>(req.prompt.size()); }
};

Scheduler::Scheduler(const Model& model, Backend& backend, const Tokenizer& tokenizer, const SchedulerOptions& o)
    : model_(model), tokenizer_(tokenizer), opts_(o), pool_(model, backend, o.n_slots, o.n_ctx, true, o.route) {
    if (o.prefill_chunk < 1) throw Error("the prefill chunk must be at least 1 token.");
    if (o.batch_tokens < 1) throw Error("the batch size must be at least 1 token.");
    if (o.prefix_cache_bytes > 0 || o.disk_cache) {
        cache_.emplace(o.prefix_cache_bytes, o.disk_cache ? std::make_unique<SnapshotDisk>(*o.disk_cache) : nullptr);
        copier_ = std::make_unique<SnapshotCopier>(backend, kMaxStagedBytes);
    }
    held_.resize(static_cast<size_t>(o.n_slots));
    slot_.resize(static_cast<size_t>(o.n_slots));
}

Scheduler::~Scheduler() {
    // Snapshots still downloading reach the cache (and its disk tier) first.
    if (copier_) store_copied(true);
}

void Scheduler::store_copied(bool wait) {
    if (!copier_) return;
    for (SessionSnapshot& s : copier_->take(wait)) cache_->store(std::move(s));
}

uint64_t Scheduler::submit(Request r) {
    if (r.prompt.empty()) throw Error("the prompt is empty: nothing to continue from.");
    if (static_cast<int64_t>(r.prompt.size()) >= opts_.n_ctx)
        throw Error("the prompt needs " + std::to_string(r.prompt.size()) + " tokens but the context holds " +
                    std::to_string(opts_.n_ctx) + ".");
    const int64_t V = model_.info().n_vocab;
    for (int32_t t : r.prompt)
        if (t < 0 || t >= V)
            throw Error("token id " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(V) +
                        " tokens.");
    if (r.options.sampler) throw Error("a scheduled request samples with its own sampler.");
    Sampler check(r.options.sampling);  // a bad parameter fails here, not in the loop
    if (r.options.top_logprobs > kMaxTopLogprobs)
        throw Error("top_logprobs is " + std::to_string(r.options.top_logprobs) + ", but at most " +
                    std::to_string(kMaxTopLogprobs) + " alternatives can be reported.");
    (void)check;
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= opts_.max_queue)
        throw QueueFull("the queue holds " + std::to_string(queue_.size()) + " requests already; retry later.");
    const uint64_t id = next_id_++;
    queue_.push_back(Queued{id, std::move(r)});
    work_.notify_one();
    return id;
}

void Scheduler::cancel_all() {
    std::lock_guard<std::mutex> lock(mu_);
    cancel_all_ = true;
    work_.notify_one();
}

void Scheduler::cancel(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_.push_back(id);
    work_.notify_one();
}

SchedulerStats Scheduler::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    SchedulerStats s = stats_;
    if (cache_ && cache_->disk()) s.disk = cache_->disk()->stats();  // the disk tier locks its own
    s.queued = queue_.size();
    s.active = static_cast<int>(std::count_if(slot_.begin(), slot_.end(), [](const auto& a) { return a != nullptr; }));
    s.slots = static_cast<int>(slot_.size());
    return s;
}

void Scheduler::admit() {
    std::vector<Queued> dropped;  // cancelled while queued: answered outside the lock
    std::vector<uint64_t> cancel_active;
    std::vector<std::pair<uint64_t, Request>> admitted;
    std::vector<int> free;
    for (size_t s = 0; s < slot_.size(); ++s)
        if (!slot_[s]) free.push_back(static_cast<int>(s));
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (cancel_all_) {
            for (Queued& q : queue_) dropped.push_back(std::move(q));
            queue_.clear();
            for (auto& a : slot_)
                if (a) cancel_active.push_back(a->id);
            cancel_all_ = false;
        }
        for (uint64_t id : cancelled_) {
            auto q = std::find_if(queue_.begin(), queue_.end(), [&](const Queued& x) { return x.id == id; });
            if (q != queue_.end()) {
                dropped.push_back(std::move(*q));
                queue_.erase(q);
            } else {
                cancel_active.push_back(id);
            }
        }
        cancelled_.clear();
        while (!queue_.empty() && admitted.size() < free.size()) {
            admitted.emplace_back(queue_.front().id, std::move(queue_.front().request));
            queue_.pop_front();
        }
    }
    for (Queued& q : dropped) {
        GenerateResult r;
        r.reason = StopReason::cancelled;
        r.prompt_tokens = static_cast<int64_t>(q.request.prompt.size());
        if (q.request.on_done) q.request.on_done(r);
    }
    for (uint64_t id : cancel_active)
        for (auto& a : slot_)
            if (a && a->id == id) a->cancelled = true;

    for (auto& [id, req] : admitted) {
        // The free slot that keeps the most of this prompt.
        const auto& p = req.prompt;
        int best = -1;
        int64_t keep = -1;
        for (int s : free) {
            // The last prompt token is evaluated for its logits.
            const int64_t common = common_prefix(held_[static_cast<size_t>(s)], p, static_cast<int64_t>(p.size()) - 1);
            const int64_t k = pool_.can_rewind(s, common) ? common : 0;
            if (k > keep) {
                keep = k;
                best = s;
            }
        }
        free.erase(std::find(free.begin(), free.end(), best));
        auto a = std::make_unique<Active>(id, std::move(req), best, tokenizer_);
        auto& held = held_[static_cast<size_t>(best)];
        // A snapshot still downloading that this prompt would resume from:
        // wait for it, so a request sees every snapshot taken before it came.
        if (copier_ && copier_->pending_prefix_of(a->req.prompt, keep)) store_copied(true);
        const uint64_t disk_hits = cache_ ? cache_->stats().disk_hits : 0;
        const SessionSnapshot* snap = cache_ ? cache_->find(a->req.prompt, keep) : nullptr;
        const bool from_disk = cache_ && cache_->stats().disk_hits > disk_hits;
        if (snap) {
            pool_.restore(best, snap->state);
            held = snap->tokens;
            keep = snap->n_past();
        } else if (keep > 0) {
            pool_.try_rewind(best, keep);
            held.resize(static_cast<size_t>(keep));
        } else {
            pool_.reset(best);
            held.clear();
            keep = 0;
        }
        a->fed = keep;
        a->result.prompt_tokens = static_cast<int64_t>(a->req.prompt.size());
        a->result.cached_tokens = keep;
        {
            std::lock_guard<std::mutex> lock(mu_);
            stats_.cached_tokens += static_cast<uint64_t>(keep);
            if (snap) ++(from_disk ? stats_.disk_hits : stats_.snapshot_hits);
            else if (keep > 0) ++stats_.slot_hits;
        }
        slot_[static_cast<size_t>(best)] = std::move(a);
    }
}

namespace {
// Prompt tokens a request must gain to take another slot's prefix or to wait
// for it: below this its own chunk costs less than the wait.
constexpr int64_t kMinForkTokens = 32;

}  // namespace

void Scheduler::announce(Active& a) {
    if (a.announced) return;
    a.announced = true;
    if (a.req.on_admit) a.req.on_admit(a.result.cached_tokens);
}

int Scheduler::fork_or_wait(Active& a, const std::vector<Active*>& order, int64_t* until) {
    if (a.announced || !a.prefilling() || !pool_.forks()) return -1;
    const auto& p = a.req.prompt;
    const int64_t cap = static_cast<int64_t>(p.size()) - 1;  // the last prompt token is evaluated for its logits
    // A running request whose slot holds more of this prompt.
    Active* src = nullptr;
    int64_t have = a.fed;
    for (Active* o : order) {
        if (o == &a) continue;
        const int64_t c = common_prefix(held_[static_cast<size_t>(o->slot)], p, cap);
        if (c > have && pool_.can_rewind(o->slot, c)) {
            have = c;
            src = o;
        }
    }
    // An earlier request still reading a longer part of this prompt: wait
    // for it rather than evaluate the same tokens alongside (or fork the
    // part it has read so far and evaluate the rest). Only earlier ones: the
    // earliest prefilling request never waits, so every step runs something.
    int on = -1;
    int64_t later = -1;
    for (size_t j = 0; j < order.size() && order[j]->id < a.id; ++j) {
        const Active* o = order[j];
        if (!o->prefilling()) continue;
        const int64_t c = common_prefix(o->req.prompt, p, cap);
        if (o->fed < c && c > later) {
            later = c;
            on = static_cast<int>(j);
        }
    }
    if (later > have && later - a.fed >= kMinForkTokens) {
        *until = later;
        return on;
    }
    if (src && have - a.fed >= kMinForkTokens && pool_.fork(src->slot, a.slot, have)) {
        const auto& from = held_[static_cast<size_t>(src->slot)];
        held_[static_cast<size_t>(a.slot)].assign(from.begin(), from.begin() + have);
        {
            std::lock_guard<std::mutex> lock(mu_);
            stats_.cached_tokens += static_cast<uint64_t>(have - a.fed);
            ++stats_.fork_hits;
        }
        a.fed = have;
        a.result.cached_tokens = have;
    }
    return -1;
}

bool Scheduler::step() {
    const Clock::time_point begin = Clock::now();
    store_copied(false);
    admit();
    const Clock::time_point admitted = Clock::now();
    // Requests cancelled since the last step end before it.
    for (auto& a : slot_)
        if (a && a->cancelled) finish(*a, StopReason::cancelled);

    // Arrival order (ids grow with submission): prefill chunks go to the
    // earliest prompts first.
    std::vector<Active*> order;
    for (auto& a : slot_)
        if (a) order.push_back(a.get());
    std::sort(order.begin(), order.end(), [](const Active* x, const Active* y) { return x->id < y->id; });
    // Forks and waits first. A request that others wait for may take the
    // whole step budget, not only its chunk: they start once it has read
    // their common prefix. Where the model state resumes only where it ends
    // (DeepSeek V4's rings), its chunk stops where they fork.
    std::vector<bool> waits(order.size(), false), waited_on(order.size(), false);
    std::vector<int64_t> stop_at(order.size(), -1);
    for (size_t i = 0; i < order.size(); ++i) {
        int64_t until = -1;
        const int j = fork_or_wait(*order[i], order, &until);
        if (j < 0) continue;
        waits[i] = true;
        waited_on[static_cast<size_t>(j)] = true;
        int64_t& stop = stop_at[static_cast<size_t>(j)];
        if (!pool_.can_rewind_anywhere() && (stop < 0 || until < stop)) stop = until;
    }

    std::vector<SeqStep> steps;
    std::vector<Active*> who;
    bool prefill = false, decode = false;
    int64_t budget = opts_.batch_tokens;
    for (const Active* a : order)
        if (!a->prefilling()) --budget;  // a decode row each
    bool first_chunk = true;
    for (size_t i = 0; i < order.size(); ++i) {
        Active* a = order[i];
        SeqStep st;
        st.slot = a->slot;
        if (a->prefilling()) {
            if (waits[i] || (!first_chunk && budget <= 0)) continue;
            const int64_t share = waited_on[i] ? std::max(opts_.prefill_chunk, budget) : opts_.prefill_chunk;
            int64_t n = std::min(share, static_cast<int64_t>(a->req.prompt.size()) - a->fed);
            if (stop_at[i] > a->fed) n = std::min(n, stop_at[i] - a->fed);
            if (!first_chunk) n = std::min(n, budget);
            first_chunk = false;
            budget -= n;
            st.tokens = std::span<const int32_t>(a->req.prompt).subspan(static_cast<size_t>(a->fed), static_cast<size_t>(n));
            prefill = true;
            announce(*a);
        } else {
            st.tokens = std::span<const int32_t>(&a->next, 1);
            decode = true;
        }
        const GenerateOptions& o = a->req.options;
        st.best = candidates_for(a->sampler, tokenizer_, o.ignore_eos, o.top_logprobs >= 0, model_.info().n_vocab);
        steps.push_back(st);
        who.push_back(a);
    }
    if (steps.empty()) return false;

    std::vector<std::vector<float>> logits;
    std::vector<Candidates> best;
    const Clock::time_point forward = Clock::now();
    try {
        logits = pool_.step(steps, {}, &best);
    } catch (const Error& e) {
        const bool unavailable = dynamic_cast<const StageUnavailable*>(&e) != nullptr;
        for (Active* a : who) {
            a->result.error = e.what();
            a->result.unavailable = unavailable;
            finish(*a, StopReason::failed);
        }
        return true;
    }
    const double forward_seconds = seconds_between(forward, Clock::now());
    {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.steps;
        if (prefill && decode) ++stats_.mixed_steps;
        for (size_t i = 0; i < who.size(); ++i)
            (who[i]->prefilling() ? stats_.prefill_tokens : stats_.decode_tokens) += steps[i].tokens.size();
        stats_.forward_seconds += forward_seconds;
        if (prefill) stats_.prefill_forward_seconds += forward_seconds;
        stats_.admit_seconds += seconds_between(begin, admitted);
    }
    double snapshot_seconds = 0;
    uint64_t snapshots = 0, snapshots_aside = 0;
    for (size_t i = 0; i < who.size(); ++i) {
        Active& a = *who[i];
        auto& held = held_[static_cast<size_t>(a.slot)];
        held.insert(held.end(), steps[i].tokens.begin(), steps[i].tokens.end());
        if (a.prefilling()) {
            a.fed += static_cast<int64_t>(steps[i].tokens.size());
            if (a.prefilling()) continue;  // more prompt to read
            a.prompt_done = Clock::now();
            a.result.prefill_seconds = seconds_between(a.started, a.prompt_done);
            if (cache_) {
                const Clock::time_point t = Clock::now();
                std::optional<StagedSnapshot> staged;
                if (copier_->has_room(pool_.snapshot_bytes(a.slot))) staged = pool_.stage(a.slot, kStagingSpareBytes);
                if (staged) {
                    copier_->push(std::move(*staged));
                    ++snapshots_aside;
                } else {
                    cache_->store(SessionSnapshot{pool_.snapshot(a.slot), held});
                }
                snapshot_seconds += seconds_between(t, Clock::now());
                ++snapshots;
            }
        } else if (a.end_pending) {
            finish(a, StopReason::end_of_generation);
            continue;
        }
        after_logits(a, logits[i], best[i]);
    }
    std::lock_guard<std::mutex> lock(mu_);
    stats_.snapshot_seconds += snapshot_seconds;
    stats_.snapshots += snapshots;
    stats_.snapshots_aside += snapshots_aside;
    stats_.longest_step_seconds = std::max(stats_.longest_step_seconds, seconds_between(begin, Clock::now()));
    return true;
}

// The logits of the request's newest position: what generate() does
// after each eval, for this request alone.
void Scheduler::after_logits(Active& a, std::span<const float> logits, const Candidates& best) {
    const GenerateOptions& o = a.req.options;
    if (o.max_tokens >= 0 && static_cast<int64_t>(a.result.tokens.size()) >= o.max_tokens)
        return finish(a, StopReason::max_tokens);
    if (pool_.n_past(a.slot) >= opts_.n_ctx) return finish(a, StopReason::context_full);
    const int32_t id = best.empty() ? sample_next(a.sampler, logits, tokenizer_, o.ignore_eos, a.banned)
                                    : sample_next(a.sampler, best, tokenizer_, o.ignore_eos);
    a.result.tokens.push_back(id);
    if (o.top_logprobs >= 0) {
        a.result.logprobs.push_back(sampled_logprobs(logits, id, o.top_logprobs));
        if (a.req.on_logprobs) a.req.on_logprobs(a.result.logprobs.back());
    }
    if (tokenizer_.is_eog(id)) {
        if (o.eval_end_token && pool_.n_past(a.slot) < opts_.n_ctx) {
            a.next = id;
            a.end_pending = true;
            return;
        }
        return finish(a, StopReason::end_of_generation);
    }
    const std::string text = a.reply.push(id);
    if (!text.empty()) {
        a.result.text += text;
        if (a.req.on_text && !a.req.on_text(text)) a.cancelled = true;
    }
    if (a.reply.stopped()) return finish(a, StopReason::stop_string);
    if (a.cancelled) return finish(a, StopReason::cancelled);
    a.next = id;
}

void Scheduler::finish(Active& a, StopReason reason) {
    // The tail (ReplyText::finish), as generate() ends.
    if (reason != StopReason::cancelled && reason != StopReason::failed && !a.reply.stopped()) {
        const std::string tail = a.reply.finish();
        if (a.reply.stopped()) reason = StopReason::stop_string;
        if (!tail.empty()) {
            a.result.text += tail;
            if (a.req.on_text) a.req.on_text(tail);
        }
    }
    a.result.reason = reason;
    if (reason == StopReason::stop_string) a.result.stop_string = a.reply.matched_stop();
    if (a.prompt_done != Clock::time_point{}) a.result.decode_seconds = seconds_between(a.prompt_done, Clock::now());
    std::unique_ptr<Active> gone = std::move(slot_[static_cast<size_t>(a.slot)]);
    {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.completed;
    }
    if (gone->req.on_done) gone->req.on_done(gone->result);
}

void Scheduler::serve(const std::function<bool()>& stop, std::chrono::milliseconds idle_wait) {
    while (!stop()) {
        if (step()) continue;  // (each step first stores the snapshots finished since the last)
        std::unique_lock<std::mutex> lock(mu_);
        work_.wait_for(lock, idle_wait, [&] { return !queue_.empty() || !cancelled_.empty() || cancel_all_; });
    }
    store_copied(true);  // before the caller flushes the disk tier
}

}  // namespace ds4

#include "engine/slot_pool.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

#include "common/error.h"
#include "common/log.h"

namespace ds4 {

uint64_t SlotSnapshot::bytes() const {
    uint64_t b = 0;
    for (const auto& t : tensors) b += t.size() * sizeof(float);
    for (const auto& p : route) b += p.bytes();
    return b;
}

SlotPool::SlotPool(const Model& model, Backend& backend, int n_slots, int64_t n_ctx, bool replay_decode,
                   std::shared_ptr<Downstream> downstream)
    : model_(model), backend_(backend), n_ctx_(n_ctx), replay_decode_(replay_decode), downstream_(std::move(downstream)) {
    if (n_ctx < 1) throw Error("the context size must be at least 1 token.");
    if (n_slots < 1 || n_slots > model.max_slots())
        throw Error(model.info().arch + " runs 1 to " + std::to_string(model.max_slots()) +
                    " sequences in one state, not " + std::to_string(n_slots) + ".");
    state_ = model_.new_state(backend_, n_ctx, n_slots);
    n_past_.assign(static_cast<size_t>(n_slots), 0);
    history_.assign(static_cast<size_t>(n_slots), TokenHistory{});
    route_refused_.assign(static_cast<size_t>(n_slots), std::string{});
    if (downstream_ && model_.info().layers.has_last_block(model_.info().n_layer))
        throw Error("this process runs the model's last block, so no pipeline stage can follow it.");
}

const std::vector<int32_t>& SlotPool::tokens(int slot) const {
    check_slot(slot);
    return history_[static_cast<size_t>(slot)].tokens();
}

uint64_t SlotPool::prefix_hash(int slot, int64_t n) const {
    check_slot(slot);
    return history_[static_cast<size_t>(slot)].prefix_hash(n);
}

void SlotPool::check_slot(int slot) const {
    if (slot < 0 || slot >= n_slots())
        throw Error("sequence slot " + std::to_string(slot) + " does not exist (" + std::to_string(n_slots()) +
                    " slots).");
}

int64_t SlotPool::n_past(int slot) const {
    check_slot(slot);
    return n_past_[static_cast<size_t>(slot)];
}

void SlotPool::reset(int slot) {
    check_slot(slot);
    n_past_[static_cast<size_t>(slot)] = 0;
    history_[static_cast<size_t>(slot)].clear();
    route_refused_[static_cast<size_t>(slot)].clear();
}

bool SlotPool::can_rewind(int slot, int64_t n) const {
    check_slot(slot);
    const int64_t past = n_past_[static_cast<size_t>(slot)];
    return n >= 0 && n <= past && state_->can_rewind(n, past);
}

bool SlotPool::try_rewind(int slot, int64_t n) {
    if (!can_rewind(slot, n)) return false;
    n_past_[static_cast<size_t>(slot)] = n;
    history_[static_cast<size_t>(slot)].truncate(n);
    return true;
}

bool SlotPool::fork(int src, int dst, int64_t n) {
    check_slot(src);
    check_slot(dst);
    if (!forks() || src == dst || n <= 0 || !can_rewind(src, n)) return false;
    // The views of the first n positions: what a snapshot at n would hold.
    const std::vector<Tensor> from = state_->slot_tensors(src, n);
    std::vector<Tensor> to = state_->slot_tensors(dst, n);
    for (size_t i = 0; i < from.size(); ++i) backend_.copy(from[i], to[i]);
    n_past_[static_cast<size_t>(dst)] = n;
    history_[static_cast<size_t>(dst)] = history_[static_cast<size_t>(src)];
    history_[static_cast<size_t>(dst)].truncate(n);
    route_refused_[static_cast<size_t>(dst)].clear();
    return true;
}

std::vector<std::vector<float>> SlotPool::step(std::span<const SeqStep> requests, std::span<const float> hidden_in,
                                               std::vector<Candidates>* best) {
    if (best) best->assign(requests.size(), Candidates{});
    if (!downstream_ || !embeds() || replaying_) return run_step(requests, hidden_in, best);
    try {
        return run_step(requests, hidden_in, best);
    } catch (const RouteStateLost& e) {
        // A later stage lost these sequences (a worker restarted, or cannot
        // rewind where this one did). This pool holds their tokens, so it
        // runs each again from position 0 through the whole route, then the
        // step itself: the same values as if nothing had been lost.
        // A restore the route refused already said why: that sentence is
        // the one warning, not the stage's view of the same loss.
        std::string why = e.what();
        for (const SeqStep& r : requests)
            if (!route_refused_[static_cast<size_t>(r.slot)].empty()) why = route_refused_[static_cast<size_t>(r.slot)];
        log_warning(why + " Replaying the sequences' history through the route.");
        for (const SeqStep& r : requests) replay_history(r.slot);
        return run_step(requests, hidden_in, best);
    }
}

void SlotPool::replay_history(int slot) {
    const std::vector<int32_t> held = history_[static_cast<size_t>(slot)].tokens();
    reset(slot);
    replaying_ = true;
    try {
        // Chunks small enough for any expert cache and any stage's scratch.
        constexpr size_t kChunk = 256;
        for (size_t done = 0; done < held.size(); done += kChunk) {
            const size_t m = std::min(kChunk, held.size() - done);
            const SeqStep r{slot, std::span<const int32_t>(held).subspan(done, m), false};
            run_step(std::span<const SeqStep>(&r, 1), {}, nullptr);
        }
    } catch (...) {
        replaying_ = false;
        reset(slot);
        throw;
    }
    replaying_ = false;
}

std::vector<std::vector<float>> SlotPool::run_step(std::span<const SeqStep> requests, std::span<const float> hidden_in,
                                                   std::vector<Candidates>* best) {
    const auto t0 = std::chrono::steady_clock::now();
    LocalRows local = run_local(requests, hidden_in);
    std::vector<std::vector<float>> out;
    if (local.empty()) return out;
    if (downstream_) {
        const std::vector<float> hidden = local.download(backend_);  // waits for the device: part of the stage's time
        downstream_->note_local_eval_ms(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        // The hidden rows continue along the route; its logits come back.
        std::vector<RouteSeq> seqs;
        for (const SeqStep& r : requests) {
            const int64_t past = n_past_[static_cast<size_t>(r.slot)];
            seqs.push_back(RouteSeq{r.slot, past, history_[static_cast<size_t>(r.slot)].prefix_hash(past), r.tokens,
                                    r.all_logits, r.best});
        }
        // With the head here, the route returns final hidden rows: the
        // candidates are this process's to take, from whole rows for now.
        out = downstream_->forward(seqs, hidden, local.cols, n_slots(), n_ctx_, head_after_route() ? nullptr : best);
        for (std::vector<float>& o : out) o = route_logits(std::move(o));
    } else {
        // Logits rows, or a middle stage's hidden rows (every row of every
        // request), each request's rows downloaded into its own vector;
        // or the candidates of the last row, where the request asked.
        int64_t row = 0;
        std::vector<int32_t> best_rows;
        std::vector<int> best_k;
        std::vector<Candidates*> best_out;
        for (size_t i = 0; i < requests.size(); ++i) {
            const SeqStep& r = requests[i];
            const int64_t n = r.all_logits || !local_head() ? static_cast<int64_t>(r.tokens.size()) : 1;
            if (best && local_head() && !r.all_logits && r.best > 0) {
                best_rows.push_back(static_cast<int32_t>(row));
                best_k.push_back(static_cast<int>(std::min<int64_t>({r.best, Backend::kMaxTopK, local.cols})));
                best_out.push_back(&(*best)[i]);
                out.emplace_back();
            } else {
                std::vector<float>& o = out.emplace_back(static_cast<size_t>(n * local.cols));
                local.copy_rows(backend_, row, n, o.data());
            }
            row += n;
        }
        if (!best_rows.empty()) best_of_rows(local.rows, best_rows, best_k, best_out);
    }
    // Only now, with every stage done: a failed route leaves the positions
    // where they were, and the next step continues from there.
    commit(requests);
    return out;
}

void SlotPool::best_of_rows(const Tensor& logits, const std::vector<int32_t>& rows, const std::vector<int>& ks,
                            std::vector<Candidates*>& out) {
    const int64_t n = static_cast<int64_t>(rows.size());
    const int k = *std::max_element(ks.begin(), ks.end());
    Tensor src = logits;  // a decode step: every row is a candidate row, in order
    bool in_order = n == logits.rows;
    for (int64_t i = 0; in_order && i < n; ++i) in_order = rows[static_cast<size_t>(i)] == i;
    if (!in_order) {
        src = backend_.alloc(n, logits.cols);
        backend_.gather_rows(logits, backend_.ints(rows.data(), n), src);
    }
    Tensor values = backend_.alloc(n, k);
    IntArray ids = backend_.alloc_ints(n * k), bad = backend_.alloc_ints(n);
    backend_.top_k_rows(src, k, values, ids, bad);
    std::vector<float> v(static_cast<size_t>(n * k));
    std::vector<int32_t> id(static_cast<size_t>(n * k)), first_bad(static_cast<size_t>(n));
    backend_.download(values, v.data());
    backend_.download_ints(ids, id.data());
    backend_.download_ints(bad, first_bad.data());
    for (int64_t i = 0; i < n; ++i) {
        Candidates& c = *out[static_cast<size_t>(i)];
        const size_t at = static_cast<size_t>(i * k), m = static_cast<size_t>(ks[static_cast<size_t>(i)]);
        c.logits.assign(v.begin() + std::ptrdiff_t(at), v.begin() + std::ptrdiff_t(at + m));
        c.ids.assign(id.begin() + std::ptrdiff_t(at), id.begin() + std::ptrdiff_t(at + m));
        c.first_bad = first_bad[static_cast<size_t>(i)];
    }
}

std::vector<float> SlotPool::route_logits(std::vector<float> from_route) {
    if (!head_after_route()) return from_route;
    const int64_t cols = hidden_cols(), rows = static_cast<int64_t>(from_route.size()) / cols;
    if (rows < 1 || rows * cols != static_cast<int64_t>(from_route.size()))
        throw Error("the pipeline route returned " + std::to_string(from_route.size()) +
                    " values, not final hidden rows of " + std::to_string(cols) + ".");
    Tensor hidden = backend_.alloc(rows, cols);
    backend_.upload(hidden, from_route.data());
    std::vector<int32_t> every(static_cast<size_t>(rows));
    std::iota(every.begin(), every.end(), 0);
    const Tensor logits = model_.head(backend_, hidden, backend_.ints(every.data(), rows), rows);
    std::vector<float> out(static_cast<size_t>(logits.rows * logits.cols));
    backend_.download(logits, out.data());
    return out;
}

void SlotPool::commit(std::span<const SeqStep> requests) {
    for (const SeqStep& r : requests) {
        n_past_[static_cast<size_t>(r.slot)] += static_cast<int64_t>(r.tokens.size());
        history_[static_cast<size_t>(r.slot)].append(r.tokens);
    }
}

SlotPool::LocalRows SlotPool::run_local(std::span<const SeqStep> requests, std::span<const float> hidden_in) {
    const int64_t V = n_vocab();
    std::vector<int32_t> tokens, positions, slots, logit_rows;
    std::vector<bool> seen(static_cast<size_t>(n_slots()), false);
    for (const SeqStep& r : requests) {
        check_slot(r.slot);
        if (seen[static_cast<size_t>(r.slot)])
            throw Error("sequence slot " + std::to_string(r.slot) + " appears twice in one step.");
        seen[static_cast<size_t>(r.slot)] = true;
        if (r.tokens.empty()) throw Error("a step for sequence slot " + std::to_string(r.slot) + " holds no tokens.");
        const int64_t past = n_past_[static_cast<size_t>(r.slot)], n = static_cast<int64_t>(r.tokens.size());
        if (past + n > n_ctx_)
            throw Error("the context of " + std::to_string(n_ctx_) + " tokens cannot hold " + std::to_string(past + n) +
                        " tokens; raise --ctx.");
        for (int64_t i = 0; i < n; ++i) {
            const int32_t t = r.tokens[static_cast<size_t>(i)];
            if (t < 0 || t >= V)
                throw Error("token id " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(V) +
                            " tokens.");
            if (r.all_logits || i == n - 1 || !local_head()) logit_rows.push_back(static_cast<int32_t>(tokens.size()));
            tokens.push_back(t);
            positions.push_back(static_cast<int32_t>(past + i));
            slots.push_back(r.slot);
        }
    }
    if (tokens.empty()) return LocalRows{};
    // Before the step is issued: the last one is done with its weights, and
    // a source may change what backs them (expert windows).
    model_.expert_source().between_steps(backend_);
    const int64_t rows = static_cast<int64_t>(tokens.size());
    if (embeds() != hidden_in.empty() || (!embeds() && hidden_in.size() != size_t(rows * hidden_cols())))
        throw Error(embeds() ? "this stage embeds the tokens itself and takes no hidden state."
                             : "this stage continues from the previous stage's hidden state: " + std::to_string(rows) +
                                   " x " + std::to_string(hidden_cols()) + " values, not " +
                                   std::to_string(hidden_in.size()) + ".");

    // One token per sequence and only its logits: the shape of a decode
    // step, which a backend may have recorded for this many rows. A stage
    // records too: its hidden rows in and out live at fixed addresses of
    // the recording.
    const bool decode = std::all_of(requests.begin(), requests.end(),
                                    [](const SeqStep& r) { return r.tokens.size() == 1 && !r.all_logits; });
    bool done = false;
    if (decode && replay_decode_ && !refused_rows_.count(rows) && model_.replayable_decode() && backend_.can_capture()) {
        LocalRows r = replayed(tokens, positions, slots, logit_rows, hidden_in, &done);
        if (done) return r;
    }
    Tensor logits;
    {
        Batch b;
        b.n = static_cast<int64_t>(tokens.size());
        b.token_ids = backend_.ints(tokens.data(), b.n);
        b.cache = CacheRows{backend_.ints(positions.data(), b.n), backend_.ints(slots.data(), b.n), n_ctx_};
        for (const SeqStep& r : requests)
            b.cache.max_seq_rows = std::max<int64_t>(b.cache.max_seq_rows, static_cast<int64_t>(r.tokens.size()));
        b.n_logits = static_cast<int64_t>(logit_rows.size());
        b.logit_rows = backend_.ints(logit_rows.data(), b.n_logits);
        b.host_tokens = tokens.data();
        b.host_positions = positions.data();
        b.host_slots = slots.data();
        Tensor hidden;
        if (!embeds()) {
            hidden = backend_.alloc(rows, hidden_cols());
            backend_.upload(hidden, hidden_in.data());
        }
        logits = model_.forward(backend_, *state_, b, embeds() ? nullptr : &hidden);
    }
    return LocalRows{logits, logits.cols};
}

std::vector<float> SlotPool::LocalRows::download(Backend& backend) const {
    std::vector<float> all(static_cast<size_t>(rows.rows * rows.cols));
    if (!empty()) copy_rows(backend, 0, rows.rows, all.data());
    return all;
}

void SlotPool::LocalRows::copy_rows(Backend& backend, int64_t r0, int64_t n, float* host) const {
    if (!staged) {
        backend.download(rows.row_view(r0, n), host);
        return;
    }
    backend.synchronize();  // the replay copied them out
    std::memcpy(host, staged + r0 * rows.cols, sizeof(float) * size_t(n * rows.cols));
}

namespace {
// Page-locked host memory of the backend, freed with it; null where it has
// none to give (then the recording uploads its inputs one by one).
std::shared_ptr<uint8_t> staging(Backend& backend, uint64_t bytes) {
    uint8_t* p = backend.alloc_host_staging(bytes);
    if (!p) return nullptr;
    return std::shared_ptr<uint8_t>(p, [&backend](uint8_t* q) { backend.free_host_staging(q); });
}
}  // namespace

// The recording's inputs: ids, positions, slots and logit rows (n each) and
// a later stage's hidden rows, one device block in that order, so that one
// copy from one page-locked block brings a step's inputs in.
SlotPool::Recording SlotPool::record_inputs(int64_t n) {
    const int64_t hidden = embeds() ? 0 : n * hidden_cols();
    const int64_t id_words = (4 * n + 63) / 64 * 64;  // the hidden rows 256-byte aligned, as an allocation of their own
    Recording rec;
    rec.inputs = backend_.alloc(1, id_words + hidden);  // 4-byte words: four id arrays, then floats
    auto ids = [&](int64_t k) {
        return IntArray{reinterpret_cast<int32_t*>(rec.inputs.data + k * n), n, rec.inputs.owner};
    };
    rec.tokens = ids(0);
    rec.positions = ids(1);
    rec.slots = ids(2);
    rec.logit_rows = ids(3);
    if (hidden) {
        rec.hidden = rec.inputs;
        rec.hidden.data = rec.inputs.data + id_words;
        rec.hidden.rows = n;
        rec.hidden.cols = hidden_cols();
    }
    rec.staged_in = staging(backend_, sizeof(float) * uint64_t(rec.inputs.size()));
    if (rec.staged_in && !local_head()) rec.staged_out = staging(backend_, sizeof(float) * uint64_t(n * hidden_cols()));
    return rec;
}

SlotPool::LocalRows SlotPool::replayed(const std::vector<int32_t>& tokens, const std::vector<int32_t>& positions,
                                       const std::vector<int32_t>& slots, const std::vector<int32_t>& logit_rows,
                                       std::span<const float> hidden_in, bool* ran) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    auto it = recordings_.find(n);
    if (it == recordings_.end()) it = recordings_.emplace(n, record_inputs(n)).first;
    Recording& rec = it->second;
    if (rec.staged_in) {
        // The previous replay may still read the block (its outputs were
        // waited for in every path so far; this makes it a rule).
        backend_.synchronize();
        auto* w = reinterpret_cast<int32_t*>(rec.staged_in.get());
        for (const std::vector<int32_t>* a : {&tokens, &positions, &slots, &logit_rows}) {
            std::memcpy(w, a->data(), sizeof(int32_t) * size_t(n));
            w += n;
        }
        if (!embeds()) std::memcpy(rec.staged_in.get() + sizeof(float) * size_t(rec.hidden.data - rec.inputs.data),
                                   hidden_in.data(), sizeof(float) * size_t(n * hidden_cols()));
    } else {
        if (!embeds()) backend_.upload(rec.hidden, hidden_in.data());
        backend_.upload_ints(rec.tokens, tokens.data());
        backend_.upload_ints(rec.positions, positions.data());
        backend_.upload_ints(rec.slots, slots.data());
        backend_.upload_ints(rec.logit_rows, logit_rows.data());
    }
    if (!rec.graph) {
        Batch b;  // no host copies: a replayable model reads only the backend arrays
        b.n = n;
        b.token_ids = rec.tokens;
        b.cache = CacheRows{rec.positions, rec.slots, n_ctx_, 1};
        b.n_logits = n;
        b.logit_rows = rec.logit_rows;
        backend_.begin_capture();
        try {
            if (rec.staged_in) backend_.copy_in(rec.inputs.data, rec.staged_in.get(), sizeof(float) * size_t(rec.inputs.size()));
            rec.logits = model_.forward(backend_, *state_, b, embeds() ? nullptr : &rec.hidden);
            if (rec.staged_out && rec.logits.size() != n * hidden_cols())
                throw Error("a stage's recorded output is not its " + std::to_string(n) + " hidden rows.");
            if (rec.staged_out)
                backend_.copy_out(rec.staged_out.get(), rec.logits.data, sizeof(float) * size_t(rec.logits.size()));
        } catch (const Error& e) {
            // Some op cannot be recorded at this batch size (e.g. experts whose
            // rows the device kernels cannot read go through a host-grouped
            // path). Nothing ran while recording, so the step simply runs op
            // by op, now and whenever this many rows come again.
            try {
                backend_.end_capture();
            } catch (const Error&) {
            }
            recordings_.erase(it);
            refused_rows_.insert(n);
            replay_refused_ = e.what();
            log_warning("decode steps of " + std::to_string(n) + (n == 1 ? " row" : " rows") + " run op by op (" +
                        replay_refused_ + ")");
            *ran = false;
            return LocalRows{};
        } catch (...) {
            try {
                backend_.end_capture();
            } catch (...) {
            }
            recordings_.erase(it);
            throw;
        }
        rec.graph = backend_.end_capture();
    }
    backend_.replay(rec.graph);
    ++steps_replayed_;
    *ran = true;
    return LocalRows{rec.logits, rec.logits.cols, reinterpret_cast<const float*>(rec.staged_out.get())};
}

SlotSnapshot SlotPool::snapshot(int slot) const {
    check_slot(slot);
    SlotSnapshot snap;
    snap.n_past = n_past_[static_cast<size_t>(slot)];
    snap.tokens = history_[static_cast<size_t>(slot)].tokens();
    for (const Tensor& t : state_->slot_tensors(slot, snap.n_past)) {
        snap.tensors.emplace_back(static_cast<size_t>(t.size()));
        backend_.download(t, snap.tensors.back().data());
    }
    // The stages after this one hold the same positions once a step has
    // returned: gathering their parts makes the snapshot the whole route's.
    if (downstream_ && embeds() && snap.n_past > 0)
        snap.route = downstream_->snapshot_route(slot, snap.n_past, history_[static_cast<size_t>(slot)].prefix_hash(snap.n_past));
    return snap;
}

namespace {
uint64_t float_bytes(const std::vector<Tensor>& tensors) {
    uint64_t b = 0;
    for (const Tensor& t : tensors) b += sizeof(float) * static_cast<uint64_t>(t.size());
    return b;
}
}  // namespace

uint64_t StagedSnapshot::bytes() const { return float_bytes(tensors); }

uint64_t SlotPool::snapshot_bytes(int slot) const {
    check_slot(slot);
    return float_bytes(state_->slot_tensors(slot, n_past_[static_cast<size_t>(slot)]));
}

std::optional<StagedSnapshot> SlotPool::stage(int slot, uint64_t bytes_free) const {
    check_slot(slot);
    if (downstream_) return std::nullopt;
    const int64_t n_past = n_past_[static_cast<size_t>(slot)];
    std::vector<Tensor> views = state_->slot_tensors(slot, n_past);
    if (backend_.available_memory() < float_bytes(views) + bytes_free) return std::nullopt;
    StagedSnapshot s;
    s.n_past = n_past;
    s.tokens = history_[static_cast<size_t>(slot)].tokens();
    for (const Tensor& t : views) {
        s.tensors.push_back(backend_.alloc(t.rows, t.cols));
        backend_.copy(t, s.tensors.back());
    }
    backend_.synchronize();
    return s;
}

void SlotPool::restore(int slot, const SlotSnapshot& snap) {
    check_slot(slot);
    std::vector<Tensor> ts = state_->slot_tensors(slot, snap.n_past);
    if (ts.size() != snap.tensors.size())
        throw Error("the snapshot does not belong to this model state (it holds " + std::to_string(snap.tensors.size()) +
                    " tensors, a slot " + std::to_string(ts.size()) + ").");
    for (size_t i = 0; i < ts.size(); ++i)
        if (static_cast<size_t>(ts[i].size()) != snap.tensors[i].size())
            throw Error("the snapshot does not belong to this model state (tensor " + std::to_string(i) +
                        " differs in size).");
    if (static_cast<int64_t>(snap.tokens.size()) != snap.n_past)
        throw Error("the snapshot holds " + std::to_string(snap.tokens.size()) + " tokens for " +
                    std::to_string(snap.n_past) + " positions.");
    for (size_t i = 0; i < ts.size(); ++i) backend_.upload(ts[i], snap.tensors[i].data());
    n_past_[static_cast<size_t>(slot)] = snap.n_past;
    history_[static_cast<size_t>(slot)].clear();
    history_[static_cast<size_t>(slot)].append(snap.tokens);
    route_refused_[static_cast<size_t>(slot)].clear();
    if (downstream_ && embeds() && !snap.route.empty() && snap.n_past > 0) {
        // Each stage takes its part back, or the next step replays the
        // history through the route (correct, only slower): the sentence
        // why is that step's one warning.
        route_refused_[static_cast<size_t>(slot)] =
            downstream_->restore_route(slot, n_slots(), n_ctx_, snap.tokens,
                                       history_[static_cast<size_t>(slot)].prefix_hash(snap.n_past), snap.route);
    }
}

}  // namespace ds4

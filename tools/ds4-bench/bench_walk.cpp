#include "bench_walk.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <span>

#include "engine/slot_pool.h"

namespace ds4 {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Rates of very fast intervals would divide by ~0; a nanosecond floor keeps
// them finite without changing any measurable one.
double rate(int64_t tokens, double seconds) { return static_cast<double>(tokens) / std::max(seconds, 1e-9); }

}  // namespace

std::vector<int64_t> bench_frontiers(const BenchWalkOptions& opts) {
    std::vector<int64_t> out;
    for (int64_t f = opts.ctx_start; f <= opts.ctx_max;) {
        out.push_back(f);
        int64_t next = 0;
        if (opts.step_incr > 0) {
            next = f + opts.step_incr;
        } else {
            // ceil, and at least one more token, so a factor close to 1 still advances.
            const double grown = std::ceil(static_cast<double>(f) * opts.step_mul);
            next = grown > static_cast<double>(opts.ctx_max) ? opts.ctx_max + 1 : static_cast<int64_t>(grown);
            next = std::max(next, f + 1);
        }
        f = next;
    }
    return out;
}

std::vector<int32_t> bench_tokens(uint64_t seed, int64_t n, int64_t n_vocab) {
    // mt19937_64 and a hand-rolled modulo-free mapping: uniform_int_distribution
    // differs between standard libraries, and the sequence must not.
    std::mt19937_64 rng(seed);
    std::vector<int32_t> toks(static_cast<size_t>(n));
    for (auto& t : toks)
        t = static_cast<int32_t>((static_cast<unsigned __int128>(rng()) * static_cast<uint64_t>(n_vocab)) >> 64);
    return toks;
}

std::vector<BenchRow> run_bench_walk(const Engine& engine, const BenchWalkOptions& opts,
                                     const std::function<void(const BenchRow&)>& on_row) {
    const Model& model = engine.model();
    Backend& backend = engine.backend();
    const std::vector<int64_t> frontiers = bench_frontiers(opts);
    const int64_t n_vocab = model.info().n_vocab;
    const int n = std::max(1, opts.parallel);
    // An expert cache serves at most max_prefill_chunk() rows per pass, all
    // sequences together.
    int64_t chunk = opts.prefill_chunk;
    if (engine.max_prefill_chunk() > 0) chunk = std::max<int64_t>(1, std::min(chunk, engine.max_prefill_chunk() / n));
    // One token sequence per slot (slot 0's is the single-sequence walk's).
    std::vector<std::vector<int32_t>> tokens;
    for (int s = 0; s < n; ++s) tokens.push_back(bench_tokens(opts.seed + uint64_t(s), frontiers.back(), n_vocab));

    // State size per frontier for all n sequences, measured on a state built
    // for exactly that context (ring and compressed caches do not grow
    // linearly). Done before the pool exists so only one state is ever
    // allocated at a time.
    std::vector<uint64_t> kv_bytes;
    for (int64_t f : frontiers) kv_bytes.push_back(model.new_state(backend, f, n)->bytes());

    // Room for the deepest frontier plus its probe, in every slot.
    SlotPool pool(model, backend, n, frontiers.back() + opts.gen_tokens, !opts.op_by_op);
    std::vector<SeqStep> step(static_cast<size_t>(n));
    for (int s = 0; s < n; ++s) step[static_cast<size_t>(s)].slot = s;
    // A --layers slice runs as the pipeline stage it would be: one that does
    // not start at block 0 takes a previous stage's hidden rows (random ones
    // here, for every row of the largest step), and one without the last
    // block has no logits to pick the probe's tokens from, so it takes the
    // walk's next tokens.
    std::vector<float> hidden;
    if (!pool.embeds()) {
        std::mt19937_64 rng(opts.seed ^ 0x5eedULL);
        std::normal_distribution<float> unit(0.0f, 1.0f);
        hidden.resize(static_cast<size_t>(n * std::max(chunk, int64_t{1}) * pool.hidden_cols()));
        for (float& v : hidden) v = unit(rng);
    }
    auto hidden_for = [&](int64_t rows) {
        return pool.embeds() ? std::span<const float>() : std::span<const float>(hidden).first(size_t(rows * pool.hidden_cols()));
    };

    std::vector<BenchRow> rows;
    for (size_t i = 0; i < frontiers.size(); ++i) {
        BenchRow row;
        row.ctx = frontiers[i];
        row.kv_bytes = kv_bytes[i];
        row.parallel = n;

        // Every sequence prefills the new interval, chunk by chunk, all of
        // them in each forward pass. download() inside step() waits for the
        // device, so the time includes all of its work.
        const int64_t from = pool.n_past(0);
        std::vector<std::vector<float>> logits;
        auto t0 = Clock::now();
        for (int64_t at = from; at < row.ctx; at += chunk) {
            const int64_t m = std::min(chunk, row.ctx - at);
            for (int s = 0; s < n; ++s)
                step[static_cast<size_t>(s)].tokens =
                    std::span<const int32_t>(tokens[static_cast<size_t>(s)]).subspan(size_t(at), size_t(m));
            logits = pool.step(step, hidden_for(n * m));
        }
        row.prefill_tps = rate(n * (row.ctx - from), seconds_since(t0));

        // The probe: greedy decoding of every sequence together, one token
        // each per forward pass; its tokens must not stay in the walk's context.
        std::vector<SlotSnapshot> snaps;
        for (int s = 0; s < n; ++s) snaps.push_back(pool.snapshot(s));
        // Each step's argmax is taken where the logits are (the backend's
        // top_k_rows) unless --host-argmax: then every row is copied out
        // and scanned here, as before (an A/B of what that costs).
        std::vector<int32_t> next(static_cast<size_t>(n));
        std::vector<Candidates> best(static_cast<size_t>(n));
        for (int s = 0; s < n; ++s) step[static_cast<size_t>(s)].best = opts.host_argmax ? 0 : 1;
        const ExpertSourceStats before = engine.expert_stats();
        t0 = Clock::now();
        for (int64_t g = 0; g < opts.gen_tokens; ++g) {
            for (int s = 0; s < n; ++s) {
                const auto& l = logits[static_cast<size_t>(s)];
                const Candidates& b = best[static_cast<size_t>(s)];
                next[static_cast<size_t>(s)] =
                    !pool.has_head() ? tokens[static_cast<size_t>(s)][static_cast<size_t>((row.ctx + g) % row.ctx)]
                    : !b.empty()     ? b.ids[0]
                                     : static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
                step[static_cast<size_t>(s)].tokens = std::span<const int32_t>(&next[static_cast<size_t>(s)], 1);
            }
            logits = pool.step(step, hidden_for(n), &best);
        }
        for (int s = 0; s < n; ++s) step[static_cast<size_t>(s)].best = 0;
        const double gen_secs = seconds_since(t0);
        const ExpertSourceStats after = engine.expert_stats();
        row.gen_bytes_read = after.bytes_read - before.bytes_read;
        row.gen_read_seconds = after.read_seconds - before.read_seconds;
        row.gen_stall_seconds = after.stall_seconds - before.stall_seconds;
        row.gen_misses = after.misses - before.misses;
        row.gen_host_hits = after.host_hits - before.host_hits;
        row.gen_lookups = after.lookups - before.lookups;
        row.gen_tps = rate(n * opts.gen_tokens, gen_secs);
        row.gen_tps_per_seq = rate(opts.gen_tokens, gen_secs);
        for (int s = 0; s < n; ++s) pool.restore(s, snaps[static_cast<size_t>(s)]);

        row.steps_replayed = pool.decode_steps_replayed();
        rows.push_back(row);
        if (on_row) on_row(row);
    }
    return rows;
}

}  // namespace ds4

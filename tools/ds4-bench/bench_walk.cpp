#include "bench_walk.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <span>

#include "engine/session.h"
#include "sampling/sampler.h"

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
    const std::vector<int32_t> tokens = bench_tokens(opts.seed, frontiers.back(), n_vocab);

    // State size per frontier, measured on a state built for exactly that
    // context (ring and compressed caches do not grow linearly). Done before
    // the session exists so only one state is ever allocated at a time.
    std::vector<uint64_t> kv_bytes;
    for (int64_t f : frontiers) kv_bytes.push_back(model.new_state(backend, f)->bytes());

    // Room for the deepest frontier plus its probe.
    const std::unique_ptr<Session> owned = engine.new_session(SessionOptions{frontiers.back() + opts.gen_tokens, opts.prefill_chunk});
    Session& session = *owned;
    SamplerParams greedy;
    greedy.temperature = 0.0f;
    Sampler sampler(greedy);

    std::vector<BenchRow> rows;
    for (size_t i = 0; i < frontiers.size(); ++i) {
        BenchRow row;
        row.ctx = frontiers[i];
        row.kv_bytes = kv_bytes[i];

        const int64_t from = session.n_past();
        const std::span<const int32_t> interval(tokens.data() + from, static_cast<size_t>(row.ctx - from));
        auto t0 = Clock::now();
        // eval downloads the logits, so the time includes all device work.
        std::vector<float> logits = session.eval(interval, false);
        row.prefill_tps = rate(row.ctx - from, seconds_since(t0));

        // The probe must not leave its tokens in the walk's context.
        const SessionSnapshot snap = session.snapshot();
        t0 = Clock::now();
        for (int64_t g = 0; g < opts.gen_tokens; ++g) {
            const int32_t next = sampler.sample(logits);
            logits = session.eval(std::span<const int32_t>(&next, 1), false);
        }
        row.gen_tps = rate(opts.gen_tokens, seconds_since(t0));
        session.restore(snap);

        rows.push_back(row);
        if (on_row) on_row(row);
    }
    return rows;
}

}  // namespace ds4

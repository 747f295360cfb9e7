// The ds4-bench walk: one fixed pseudo-random token sequence fed through a
// pool of sequence slots up to a series of context frontiers (--parallel N:
// N sequences side by side, each prefilled and decoded together in one
// batch per forward pass). Between frontiers only the
// new interval is prefilled (so each row measures prefill at that depth, not
// from zero); at each frontier a greedy generation probe runs on a snapshot
// of the state, which is then restored so the walk continues unchanged.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/engine.h"

namespace ds4 {

struct BenchWalkOptions {
    int64_t ctx_start = 512;
    int64_t ctx_max = 4096;
    int64_t step_incr = 0;   // > 0: frontiers grow by this many tokens
    double step_mul = 0.0;   // > 1: frontiers grow by this factor (when step_incr is 0)
    int64_t gen_tokens = 32;
    int64_t prefill_chunk = 512;
    int parallel = 1;        // sequences decoded together in one batch, each at the same depth
    bool op_by_op = false;   // never replay a recorded decode step
    bool host_argmax = false;  // the probe's argmax from logits copied to the host, not the backend's top_k_rows
    uint64_t seed = 0;
};

struct BenchRow {
    int64_t ctx = 0;
    double prefill_tps = 0;  // tokens of the interval ending at ctx, all sequences / seconds
    double gen_tps = 0;      // probe tokens of all sequences / seconds, one token each per forward pass
    double gen_tps_per_seq = 0;  // probe tokens of one sequence / seconds
    uint64_t kv_bytes = 0;   // model state of all sequences sized for exactly ctx positions
    int parallel = 1;
    int64_t steps_replayed = 0;  // decode steps so far that replayed a recording (not op by op)
    // The expert cache during the probe (--ssd-streaming): bytes read from
    // the file and seconds waited on them, misses and host-tier copies.
    uint64_t gen_bytes_read = 0;
    double gen_read_seconds = 0;   // reads in flight
    double gen_stall_seconds = 0;  // decode waiting on them
    uint64_t gen_misses = 0, gen_host_hits = 0, gen_lookups = 0;
};

// ctx_start, then +step_incr or ×step_mul (rounded up, always at least +1),
// while <= ctx_max.
std::vector<int64_t> bench_frontiers(const BenchWalkOptions& opts);

// The token sequence: `n` ids uniform in [0, n_vocab), a function of seed only.
std::vector<int32_t> bench_tokens(uint64_t seed, int64_t n, int64_t n_vocab);

// Runs the walk; calls `on_row` as each frontier completes (so a long run
// shows progress) and returns every row. Throws ds4::Error from the session
// (e.g. a context the backend cannot allocate).
std::vector<BenchRow> run_bench_walk(const Engine& engine, const BenchWalkOptions& opts,
                                     const std::function<void(const BenchRow&)>& on_row = {});

}  // namespace ds4

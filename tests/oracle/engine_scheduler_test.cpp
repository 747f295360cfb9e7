// Continuous batching (engine/scheduler.h) against generate() on one
// session: more requests than slots, random prompts (some sharing a prefix),
// greedy or seeded sampling, stop strings and token limits; every request's
// tokens and text equal what it gets alone, steps mix prefill chunks with
// decodes, finished slots serve queued requests, and a request resubmitted
// after its first turn reuses the slot's cached prefix. Both families from
// llama.cpp's generator at realistic magnitudes, detokenized with llama.cpp's
// vocab-only Qwen2 vocabulary. Also: cancellation (queued and running), a
// full queue, bad requests, and requests submitted from other threads while
// the scheduler serves. Fresh seed each run.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>

#include "backend/backend.h"
#include "common/error.h"
#include "engine/generate.h"
#include "engine/scheduler.h"
#include "gguf/gguf_file.h"
#include "generation_fixture.h"
#include "oracle_harness.h"
#include "support/loaded_model.h"
#include "tokenizer/tokenizer.h"

namespace ds4 {
namespace {

using namespace oracle;

using Fixture = GenerationFixture;

struct Case {
    std::vector<int32_t> prompt;
    GenerateOptions options;
    GenerateResult alone, batched;
    std::string streamed;
    std::vector<SampledLogprobs> streamed_logprobs;  // on_logprobs, in order
    size_t logprobs_before_text = 0;  // on_logprobs calls seen when the last piece arrived
    int done = 0;
    int admitted = 0;
    int64_t admitted_cached = -1;  // what on_admit reported
    int order = -1;  // when it finished among the requests
};

class Scheduling : public ::testing::TestWithParam<std::string> {};

TEST_P(Scheduling, EveryRequestGetsWhatItGetsAlone) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    Fixture f(GetParam(), seed);
    const int64_t n_ctx = 128;
    const auto shared = random_token_ids(rng, 10, f.V());
    std::vector<Case> cases(7);
    for (auto& c : cases) {
        c.prompt = random_token_ids(rng, 3 + rng() % 70, f.V());
        if (rng() % 2) c.prompt.insert(c.prompt.begin(), shared.begin(), shared.end());
        c.options.max_tokens = int64_t(rng() % 12);
        c.options.sampling.temperature = rng() % 2 ? 0.0f : 0.9f;
        c.options.sampling.seed = rng();
        c.options.top_logprobs = rng() % 2 ? int(rng() % (kMaxTopLogprobs + 1)) : -1;
        SessionOptions so;
        so.n_ctx = n_ctx;
        so.prefill_chunk = 16;
        Session s(*f.m.model, *f.cpu, so);
        c.alone = generate(s, *f.tok, c.prompt, c.options);
    }
    // A stop string from the middle of one reply.
    for (auto& c : cases)
        if (c.alone.text.size() >= 6) {
            c.options.stop = {c.alone.text.substr(c.alone.text.size() / 2, 2)};
            SessionOptions so;
            so.n_ctx = n_ctx;
            Session s(*f.m.model, *f.cpu, so);
            c.alone = generate(s, *f.tok, c.prompt, c.options);
            break;
        }

    SchedulerOptions o;
    o.n_slots = 3;
    o.n_ctx = n_ctx;
    o.prefill_chunk = 1 + int64_t(rng() % 24);
    Scheduler sched(*f.m.model, *f.cpu, *f.tok, o);
    int finished = 0;
    for (auto& c : cases) {
        Request r;
        r.prompt = c.prompt;
        r.options = c.options;
        r.on_text = [&c](std::string_view t) {
            c.streamed += t;
            c.logprobs_before_text = c.streamed_logprobs.size();
            return true;
        };
        r.on_logprobs = [&c](const SampledLogprobs& l) { c.streamed_logprobs.push_back(l); };
        r.on_done = [&c, &finished](const GenerateResult& g) {
            c.batched = g;
            ++c.done;
            c.order = finished++;
        };
        r.on_admit = [&c](int64_t cached) {
            ++c.admitted;
            c.admitted_cached = cached;
        };
        sched.submit(std::move(r));
    }
    while (sched.step()) {
    }
    for (size_t i = 0; i < cases.size(); ++i) {
        const Case& c = cases[i];
        SCOPED_TRACE("request " + std::to_string(i));
        EXPECT_EQ(c.done, 1);
        EXPECT_EQ(c.batched.tokens, c.alone.tokens);
        EXPECT_EQ(c.batched.text, c.alone.text);
        EXPECT_EQ(c.streamed, c.batched.text);
        EXPECT_EQ(c.batched.reason, c.alone.reason);
        EXPECT_EQ(c.batched.stop_string, c.alone.stop_string);
        if (c.alone.reason == StopReason::stop_string) EXPECT_EQ(c.alone.stop_string, c.options.stop.at(0));
        EXPECT_EQ(c.batched.prompt_tokens, int64_t(c.prompt.size()));
        EXPECT_EQ(c.admitted, 1);
        EXPECT_EQ(c.admitted_cached, c.batched.cached_tokens);
        // Log probabilities when asked: one per sampled token, the same as
        // alone, streamed before the text they complete; greedy picks the
        // most likely token.
        const size_t n_lp = c.options.top_logprobs >= 0 ? c.batched.tokens.size() : 0;
        ASSERT_EQ(c.batched.logprobs.size(), n_lp);
        ASSERT_EQ(c.alone.logprobs.size(), n_lp);
        ASSERT_EQ(c.streamed_logprobs.size(), n_lp);
        if (n_lp > 0 && !c.streamed.empty()) EXPECT_GE(c.logprobs_before_text, 1u);
        for (size_t k = 0; k < n_lp; ++k) {
            const SampledLogprobs &b = c.batched.logprobs[k], &a = c.alone.logprobs[k];
            EXPECT_EQ(b.sampled.id, c.batched.tokens[k]);
            EXPECT_NEAR(b.sampled.logprob, a.sampled.logprob, 1e-5);
            EXPECT_EQ(c.streamed_logprobs[k].sampled.logprob, b.sampled.logprob);
            ASSERT_EQ(b.top.size(), size_t(c.options.top_logprobs));
            for (size_t t = 0; t < b.top.size(); ++t) {
                EXPECT_EQ(b.top[t].id, a.top[t].id);
                EXPECT_NEAR(b.top[t].logprob, a.top[t].logprob, 1e-5);
            }
            EXPECT_LE(b.sampled.logprob, 0.0f);
            if (c.options.sampling.temperature == 0.0f && !b.top.empty()) {
                EXPECT_EQ(b.top[0].id, b.sampled.id);
                EXPECT_EQ(b.top[0].logprob, b.sampled.logprob);
            }
        }
    }
    const SchedulerStats st = sched.stats();
    // Every prompt token is either reused or evaluated; every decode row
    // feeds a sampled token (the last sampled one of a request may not be fed).
    uint64_t prompt_sum = 0, sampled = 0;
    for (const Case& c : cases) {
        prompt_sum += c.prompt.size();
        sampled += c.batched.tokens.size();
    }
    EXPECT_EQ(st.prefill_tokens + st.cached_tokens, prompt_sum);
    EXPECT_LE(st.decode_tokens, sampled);
    EXPECT_GE(st.decode_tokens + cases.size(), sampled);
    EXPECT_EQ(st.slots, 3);
    EXPECT_EQ(st.completed, cases.size());
    EXPECT_EQ(st.active, 0);
    EXPECT_GT(st.mixed_steps, 0u) << "no step mixed a prefill chunk with decodes";
    std::printf("%s: %zu requests, 3 slots, %llu steps (%llu mixed), %llu cached prompt tokens\n", GetParam().c_str(),
                cases.size(), (unsigned long long)st.steps, (unsigned long long)st.mixed_steps,
                (unsigned long long)st.cached_tokens);

    // The next turn of the request that finished last (its slot still holds
    // it; earlier ones' slots served later requests): its prompt plus its
    // reply and more.
    Case& c0 = *std::max_element(cases.begin(), cases.end(),
                                 [](const Case& a, const Case& b) { return a.order < b.order; });
    std::vector<int32_t> turn2 = c0.prompt;
    turn2.insert(turn2.end(), c0.batched.tokens.begin(), c0.batched.tokens.end());
    const auto more = random_token_ids(rng, 4, f.V());
    turn2.insert(turn2.end(), more.begin(), more.end());
    GenerateOptions g;
    g.max_tokens = 4;
    g.sampling.temperature = 0;
    GenerateResult second;
    sched.submit(Request{turn2, g, {}, [&](const GenerateResult& r) { second = r; }});
    while (sched.step()) {
    }
    SessionOptions so;
    so.n_ctx = n_ctx;
    Session s(*f.m.model, *f.cpu, so);
    const GenerateResult alone2 = generate(s, *f.tok, turn2, g);
    EXPECT_EQ(second.tokens, alone2.tokens);
    if (GetParam() != "deepseek4") EXPECT_GT(second.cached_tokens, 0) << "the slot's prefix was not reused";
}

// Requests arriving together with one long system prompt: the earliest
// evaluates it, the others wait for it and take it from its slot
// (SlotPool::fork), so it is evaluated once, and each request still gets
// what it gets alone. DeepSeek V4's rings resume only where they end: the
// first request's chunk stops where the others fork. The step budget is
// drawn small too, so chunks also wait for their turn.
TEST_P(Scheduling, OneSystemPromptIsEvaluatedOnce) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    Fixture f(GetParam(), seed);
    const int64_t n_ctx = 128;
    const auto system = random_token_ids(rng, 40 + rng() % 24, f.V());
    struct Run {
        std::vector<int32_t> prompt;
        GenerateResult alone, got;
        int64_t admitted_cached = -1;
    };
    std::vector<Run> runs(4);
    GenerateOptions g;
    g.max_tokens = 6;
    g.sampling.temperature = 0;
    uint64_t prompt_sum = 0;
    for (Run& r : runs) {
        r.prompt = system;
        const auto own = random_token_ids(rng, 2 + rng() % 20, f.V());
        r.prompt.insert(r.prompt.end(), own.begin(), own.end());
        prompt_sum += r.prompt.size();
        SessionOptions so;
        so.n_ctx = n_ctx;
        so.prefill_chunk = 16;
        Session s(*f.m.model, *f.cpu, so);
        r.alone = generate(s, *f.tok, r.prompt, g);
    }
    SchedulerOptions o;
    o.n_slots = 4;
    o.n_ctx = n_ctx;
    o.prefill_chunk = 1 + int64_t(rng() % 24);
    o.batch_tokens = rng() % 2 ? 2048 : 1 + int64_t(rng() % 40);
    SCOPED_TRACE("chunk " + std::to_string(o.prefill_chunk) + ", batch " + std::to_string(o.batch_tokens));
    Scheduler sched(*f.m.model, *f.cpu, *f.tok, o);
    for (Run& r : runs) {
        Request q;
        q.prompt = r.prompt;
        q.options = g;
        q.on_done = [&r](const GenerateResult& x) { r.got = x; };
        q.on_admit = [&r](int64_t cached) { r.admitted_cached = cached; };
        sched.submit(std::move(q));
    }
    while (sched.step()) {
    }
    int forked = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
        const Run& r = runs[i];
        SCOPED_TRACE("request " + std::to_string(i));
        EXPECT_EQ(r.got.tokens, r.alone.tokens);
        EXPECT_EQ(r.got.text, r.alone.text);
        EXPECT_EQ(r.admitted_cached, r.got.cached_tokens);
        if (r.got.cached_tokens >= int64_t(system.size())) ++forked;
    }
    const SchedulerStats st = sched.stats();
    EXPECT_EQ(st.fork_hits, 3u);
    EXPECT_EQ(forked, 3) << "three requests should have taken the system prompt from the first one's slot";
    EXPECT_EQ(st.prefill_tokens + st.cached_tokens, prompt_sum);
    EXPECT_LE(st.prefill_tokens, prompt_sum - 3 * system.size()) << "the system prompt was evaluated more than once";
}

// The prefix cache's prompt snapshots are downloaded off the scheduler's
// thread (SnapshotCopier): one slot serves A (prompt P), then B (another
// prompt, which resets the slot), then C (P and more), which can resume only
// from A's snapshot in RAM. C must find it and get what it gets alone.
TEST_P(Scheduling, APromptSnapshotCopiedAsideServesALaterRequest) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    Fixture f(GetParam(), seed);
    const int64_t n_ctx = 128;
    const auto p = random_token_ids(rng, 30 + rng() % 30, f.V());
    auto other = random_token_ids(rng, 10 + rng() % 20, f.V());
    other[0] = p[0] == 1 ? 2 : 1;  // shares no prefix with p
    auto longer = p;
    const auto more = random_token_ids(rng, 3 + rng() % 10, f.V());
    longer.insert(longer.end(), more.begin(), more.end());
    GenerateOptions g;
    g.max_tokens = 4;
    g.sampling.temperature = 0;
    SchedulerOptions o;
    o.n_slots = 1;
    o.n_ctx = n_ctx;
    o.prefill_chunk = 1 + int64_t(rng() % 24);
    o.prefix_cache_bytes = uint64_t{1} << 30;
    Scheduler sched(*f.m.model, *f.cpu, *f.tok, o);
    std::vector<GenerateResult> got(3);
    const std::vector<std::vector<int32_t>> prompts = {p, other, longer};
    for (size_t i = 0; i < prompts.size(); ++i) {
        Request q;
        q.prompt = prompts[i];
        q.options = g;
        q.on_done = [&got, i](const GenerateResult& x) { got[i] = x; };
        sched.submit(std::move(q));
    }
    while (sched.step()) {
    }
    SessionOptions so;
    so.n_ctx = n_ctx;
    Session s(*f.m.model, *f.cpu, so);
    const GenerateResult alone = generate(s, *f.tok, longer, g);
    EXPECT_EQ(got[2].tokens, alone.tokens);
    EXPECT_EQ(got[2].text, alone.text);
    EXPECT_EQ(got[2].cached_tokens, int64_t(p.size())) << "C should have resumed from A's prompt snapshot";
    EXPECT_EQ(sched.stats().snapshot_hits, 1u);
    EXPECT_EQ(sched.stats().snapshots, 3u) << "each prompt's snapshot is taken once";
    EXPECT_EQ(sched.stats().snapshots_aside, 3u) << "the snapshots were not copied off the scheduler's thread";
}

INSTANTIATE_TEST_SUITE_P(Families, Scheduling, ::testing::Values("qwen3moe", "deepseek4", "glm-dsa"));

TEST(Scheduler, CancelQueueLimitsAndBadRequests) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    Fixture f("qwen3moe", seed);
    SchedulerOptions o;
    o.n_slots = 1;
    o.n_ctx = 64;
    o.max_queue = 2;
    Scheduler sched(*f.m.model, *f.cpu, *f.tok, o);
    GenerateOptions g;
    g.max_tokens = 20;
    g.sampling.temperature = 0;
    std::vector<GenerateResult> done(3);
    int pieces = 0;
    // 0 cancels itself after two pieces; 1 is cancelled while queued; 2 runs.
    sched.submit(Request{random_token_ids(rng, 5, f.V()), g, [&](std::string_view) { return ++pieces < 2; },
                         [&](const GenerateResult& r) { done[0] = r; }});
    const uint64_t id1 = sched.submit(Request{random_token_ids(rng, 5, f.V()), g, {}, [&](const GenerateResult& r) { done[1] = r; }});
    EXPECT_THROW(sched.submit(Request{random_token_ids(rng, 5, f.V()), g, {}, {}}), QueueFull);
    sched.step();  // admits request 0: the queue has room again
    sched.submit(Request{random_token_ids(rng, 5, f.V()), g, {}, [&](const GenerateResult& r) { done[2] = r; }});
    sched.cancel(id1);
    while (sched.step()) {
    }
    EXPECT_EQ(done[0].reason, StopReason::cancelled);
    EXPECT_EQ(pieces, 2);
    EXPECT_EQ(done[1].reason, StopReason::cancelled);
    EXPECT_TRUE(done[1].tokens.empty());
    EXPECT_EQ(done[2].reason, StopReason::max_tokens);
    EXPECT_EQ(done[2].tokens.size(), 20u);

    EXPECT_THROW(sched.submit(Request{{}, g, {}, {}}), Error);
    EXPECT_THROW(sched.submit(Request{random_token_ids(rng, 64, f.V()), g, {}, {}}), Error);
    EXPECT_THROW(sched.submit(Request{{f.V()}, g, {}, {}}), Error);
    GenerateOptions bad = g;
    bad.sampling.temperature = 1;
    bad.sampling.top_p = 0;
    EXPECT_THROW(sched.submit(Request{{1, 2}, bad, {}, {}}), Error);
}

TEST(Scheduler, ServesRequestsFromOtherThreads) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    Fixture f("qwen3moe", seed);
    SchedulerOptions o;
    o.n_slots = 2;
    o.n_ctx = 64;
    Scheduler sched(*f.m.model, *f.cpu, *f.tok, o);
    std::atomic<bool> stop{false};
    std::thread loop([&] { sched.serve([&] { return stop.load(); }, std::chrono::milliseconds(5)); });
    std::atomic<int> finished{0};
    std::vector<std::thread> clients;
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 4; ++i) prompts.push_back(random_token_ids(rng, 4 + rng() % 10, f.V()));
    for (int i = 0; i < 4; ++i)
        clients.emplace_back([&, i] {
            GenerateOptions g;
            g.max_tokens = 5;
            g.sampling.temperature = 0;
            sched.submit(Request{prompts[size_t(i)], g, {}, [&](const GenerateResult& r) {
                                     if (r.tokens.size() == 5) ++finished;
                                 }});
        });
    for (auto& c : clients) c.join();
    for (int i = 0; i < 2000 && finished.load() < 4; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    stop = true;
    loop.join();
    EXPECT_EQ(finished.load(), 4);
}

}  // namespace
}  // namespace ds4

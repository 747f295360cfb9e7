// The engine's generation loop (engine/generate.h) on a Qwen3-MoE from
// llama.cpp's generator, detokenized with llama.cpp's vocab-only Qwen2
// vocabulary: greedy generation samples the argmax of the logits a plain
// session computes; a stop string taken from that reply cuts the text just
// before its first occurrence, streamed pieces included; max_tokens and a
// cancelling callback stop where they say; a second turn whose prompt
// continues the first reuses the cached prefix and gives the same tokens as
// a fresh session. Fresh seed each run.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "backend/backend.h"
#include "common/error.h"
#include "engine/generate.h"
#include "gguf/gguf_file.h"
#include "generation_fixture.h"
#include "oracle_harness.h"
#include "support/loaded_model.h"
#include "tokenizer/tokenizer.h"

namespace ds4 {
namespace {

using namespace oracle;

struct Fixture : GenerationFixture {
    std::vector<int32_t> prompt;
    explicit Fixture(uint64_t seed) : GenerationFixture("qwen3moe", seed) {
        std::mt19937_64 rng(seed);
        prompt = random_token_ids(rng, 5 + rng() % 20, V());
    }
    std::unique_ptr<Session> session(int64_t n_ctx = 256) const {
        return std::make_unique<Session>(*m.model, *cpu, SessionOptions{n_ctx, 7});
    }
};

GenerateOptions greedy(int64_t max_tokens) {
    GenerateOptions o;
    o.max_tokens = max_tokens;
    o.sampling.temperature = 0;
    return o;
}

TEST(Generate, GreedyFollowsTheArgmaxAndStopsWhereAsked) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(test::seed_note(seed));
    Fixture f(seed);
    ASSERT_LT(f.m.model->info().n_vocab, int64_t(f.tok->n_vocab()));

    // The reference: a plain session, argmax by hand.
    auto ref = f.session();
    std::vector<float> logits = ref->eval(f.prompt, false);
    std::vector<int32_t> want;
    for (int i = 0; i < 24; ++i) {
        want.push_back(int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()));
        logits = ref->eval(std::vector<int32_t>{want.back()}, false);
    }

    auto s = f.session();
    std::string streamed;
    const GenerateResult r = generate(*s, *f.tok, f.prompt, greedy(24),
                                      {[&](std::string_view piece) {
                                           streamed += piece;
                                           return true;
                                       },
                                       {}});
    EXPECT_EQ(r.tokens, want);
    EXPECT_EQ(r.reason, StopReason::max_tokens);
    EXPECT_STREQ(finish_reason(r.reason), "length");
    EXPECT_EQ(r.text, streamed);
    EXPECT_EQ(r.text, f.tok->decode(want));
    EXPECT_EQ(r.prompt_tokens, int64_t(f.prompt.size()));

    // A stop string from the middle of that reply.
    const std::string full = r.text;
    if (full.size() >= 12) {
        const std::string stop = full.substr(full.size() / 2, 3);
        auto s2 = f.session();
        std::string pieces;
        GenerateOptions o = greedy(24);
        o.stop = {stop, "\x01never"};
        const GenerateResult cut = generate(*s2, *f.tok, f.prompt, o,
                                            {[&](std::string_view p) {
                                                 pieces += p;
                                                 return true;
                                             },
                                             {}});
        EXPECT_EQ(cut.reason, StopReason::stop_string);
        EXPECT_EQ(cut.text, full.substr(0, full.find(stop)));
        EXPECT_EQ(pieces, cut.text) << "the stream showed text past the stop string";
    }

    // Cancelled by the callback after three pieces.
    auto s3 = f.session();
    int calls = 0;
    const GenerateResult c =
        generate(*s3, *f.tok, f.prompt, greedy(24), {[&](std::string_view) { return ++calls < 3; }, {}});
    EXPECT_EQ(c.reason, StopReason::cancelled);
    EXPECT_EQ(calls, 3);
    EXPECT_LT(c.tokens.size(), want.size());

    // The context fills before max_tokens.
    auto s4 = f.session(int64_t(f.prompt.size()) + 5);
    const GenerateResult full_ctx = generate(*s4, *f.tok, f.prompt, greedy(-1));
    EXPECT_EQ(full_ctx.reason, StopReason::context_full);
    EXPECT_EQ(full_ctx.tokens, std::vector<int32_t>(want.begin(), want.begin() + 5));
}

// ignore_eos bans every end-of-generation token: on a row where an end token
// is by far the most likely, greedy takes the best other token and sampling
// never draws an end token; without it the end token wins.
TEST(Generate, IgnoreEosNeverSamplesAnEndToken) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(test::seed_note(seed));
    Fixture f(seed);
    const auto& eog = f.tok->eog_ids();
    ASSERT_FALSE(eog.empty());
    for (int32_t id : eog) EXPECT_TRUE(f.tok->is_eog(id));
    std::mt19937_64 rng(seed);
    const size_t n = size_t(f.tok->n_vocab());
    std::vector<float> logits(n);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (auto& x : logits) x = u(rng);
    const int32_t end = eog[rng() % eog.size()];
    logits[size_t(end)] = 50.0f;
    int32_t best_other = -1;  // by hand: the argmax over the tokens that do not end a reply
    for (size_t i = 0; i < n; ++i)
        if (!f.tok->is_eog(int32_t(i)) && (best_other < 0 || logits[i] > logits[size_t(best_other)])) best_other = int32_t(i);
    std::vector<float> scratch;
    Sampler greedy_sampler(greedy(1).sampling);
    EXPECT_EQ(sample_next(greedy_sampler, logits, *f.tok, false, scratch), end);
    EXPECT_EQ(sample_next(greedy_sampler, logits, *f.tok, true, scratch), best_other);
    SamplerParams hot;
    hot.temperature = 2.0f;
    hot.top_k = 0;
    hot.top_p = 1.0f;
    hot.min_p = 0.0f;
    hot.seed = seed;
    Sampler sampler(hot);
    for (auto id : eog) logits[size_t(id)] = 50.0f;
    for (int i = 0; i < 200; ++i) EXPECT_FALSE(f.tok->is_eog(sample_next(sampler, logits, *f.tok, true, scratch)));
}

TEST(Generate, SecondTurnReusesTheCachedPrefix) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(test::seed_note(seed));
    Fixture f(seed);
    auto s = f.session();
    const GenerateResult first = generate(*s, *f.tok, f.prompt, greedy(6));
    std::vector<int32_t> turn2 = f.prompt;
    turn2.insert(turn2.end(), first.tokens.begin(), first.tokens.end());
    turn2.push_back(f.prompt.front());
    const GenerateResult second = generate(*s, *f.tok, turn2, greedy(6));
    EXPECT_EQ(second.cached_tokens, int64_t(turn2.size()) - 1);
    auto fresh = f.session();
    const GenerateResult again = generate(*fresh, *f.tok, turn2, greedy(6));
    EXPECT_EQ(again.cached_tokens, 0);
    EXPECT_EQ(second.tokens, again.tokens);
}

TEST(Generate, BadRequestsAreOneSentence) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(test::seed_note(seed));
    Fixture f(seed);
    auto s = f.session(int64_t(f.prompt.size()));
    EXPECT_THROW(generate(*s, *f.tok, f.prompt, greedy(4)), Error);  // the prompt fills the context
    auto s2 = f.session();
    EXPECT_THROW(generate(*s2, *f.tok, std::vector<int32_t>{}, greedy(4)), Error);
    GenerateOptions bad = greedy(4);
    bad.sampling.temperature = 1;
    bad.sampling.top_p = 2;
    EXPECT_THROW(generate(*s2, *f.tok, f.prompt, bad), Error);
}

}  // namespace
}  // namespace ds4

// Generation on a session: the prompt fed through the cached prefix, then
// tokens sampled one at a time until the end-of-generation token, a stop
// string, the token limit, a full context or the caller cancels; the text
// streamed in whole characters with stop strings held back. The CLI and the
// server generate through this one loop.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/prefix_cache.h"
#include "engine/session.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"

namespace ds4 {

class Tokenizer;

struct GenerateOptions {
    int64_t max_tokens = -1;         // < 0: until the context is full
    SamplerParams sampling;
    // Continue this sampler's random stream instead (a chat's turns); it
    // must outlive the call. Null: a new sampler from `sampling`.
    Sampler* sampler = nullptr;
    std::vector<std::string> stop;   // stop strings (stop_strings.h)
    // Feed the end-of-generation token through the model too: a chat
    // template writes it after the reply, so the next turn's prompt then
    // reuses the whole cached conversation.
    bool eval_end_token = true;
    // Resume from the longest snapshot the prompt starts with where the live
    // sequence keeps less, and keep a snapshot of the prompt's state once it
    // is evaluated (prefix_cache.h). Null: the live sequence only.
    PrefixCache* prefix_cache = nullptr;
    // Log probabilities (sampling/logprobs.h) of each sampled token and of
    // this many alternatives, 0..kMaxTopLogprobs; < 0: none (no cost).
    int top_logprobs = -1;
    // llama.cpp's and vLLM's ignore_eos: end-of-generation tokens are never
    // sampled, so the reply runs to max_tokens or the end of the context.
    bool ignore_eos = false;
};

// The next token from a row of logits, end-of-generation tokens banned when
// ignore_eos (the row copied into `scratch` first; no cost otherwise).
int32_t sample_next(Sampler& sampler, std::span<const float> logits, const Tokenizer& tokenizer, bool ignore_eos,
                    std::vector<float>& scratch);

// How many of a row's best tokens (SeqStep::best) sample_next needs to
// draw exactly what it would from the whole row: the sampler's need plus
// the banned end tokens (ignore_eos); 0 when the whole row is needed (top-k
// off, logprobs asked for, or a vocabulary not larger than that).
int candidates_for(const Sampler& sampler, const Tokenizer& tokenizer, bool ignore_eos, bool logprobs, int64_t n_vocab);
// sample_next from a row's best tokens (at least candidates_for of them).
int32_t sample_next(Sampler& sampler, const Candidates& best, const Tokenizer& tokenizer, bool ignore_eos);

enum class StopReason { end_of_generation, stop_string, max_tokens, context_full, cancelled, failed };
// "stop", "length", ... as OpenAI's finish_reason names them.
const char* finish_reason(StopReason reason);

struct GenerateResult {
    std::string text;                // what was streamed, stop string excluded
    std::vector<int32_t> tokens;     // sampled ids (the end token included when sampled)
    // options.top_logprobs >= 0: one entry per entry of `tokens`, in order.
    std::vector<SampledLogprobs> logprobs;
    StopReason reason = StopReason::end_of_generation;
    int64_t prompt_tokens = 0;
    int64_t cached_tokens = 0;       // prompt tokens reused from the session's cache
    double prefill_seconds = 0, decode_seconds = 0;
    std::string stop_string;         // StopReason::stop_string: which one (Anthropic reports it)
    std::string error;               // StopReason::failed: what went wrong, one sentence
    bool unavailable = false;        // StopReason::failed because a pipeline stage is gone (HTTP 503)
};

struct GenerateCallbacks {
    // A piece of text, whole characters; return false to stop generating.
    std::function<bool(std::string_view)> on_text;
    // Prefill progress: positions done of total, after each chunk.
    std::function<void(int64_t, int64_t)> on_prefill;
};

// Throws ds4::Error (one sentence) when the prompt does not fit the
// context or a sampling parameter is out of range.
GenerateResult generate(Session& session, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                        const GenerateOptions& options, const GenerateCallbacks& callbacks = {});

}  // namespace ds4

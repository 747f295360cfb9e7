// Log probabilities of a sampled token and of the most likely alternatives,
// as OpenAI's `logprobs` / `top_logprobs` report them: log-softmax of the
// row of logits the sampler was given, before temperature, top-k, top-p or
// min-p reshape it, so they describe the model's distribution and not the
// sampling settings (llama.cpp's server reports the same quantity).
//
// Computed only for requests that ask (generate.h: top_logprobs >= 0): one
// pass over the row for its maximum and its log-sum-exp in double
// precision, one bounded selection of the top n. A request that does not
// ask pays nothing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ds4 {

// The most alternatives a request may ask for (OpenAI's bound).
constexpr int kMaxTopLogprobs = 20;

struct TokenLogprob {
    int32_t id = -1;
    float logprob = 0.0f;  // natural log; -infinity for a banned (-infinity) logit
};

struct SampledLogprobs {
    TokenLogprob sampled;           // the token the sampler picked
    std::vector<TokenLogprob> top;  // the n most likely tokens, most likely first (equal: lower id first)
};

// `sampled` must index `logits`; `n_top` in [0, kMaxTopLogprobs]. Tokens
// with a -infinity logit are never among `top`. Throws ds4::Error on an
// empty row or a bad index.
SampledLogprobs sampled_logprobs(std::span<const float> logits, int32_t sampled, int n_top);

}  // namespace ds4

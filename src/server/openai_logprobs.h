// The log probabilities of a reply's tokens (sampling/logprobs.h) in
// OpenAI's two shapes:
//  - chat completions: choices[].logprobs.content, one entry per token
//    {token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]};
//  - text completions: choices[].logprobs {tokens, token_logprobs,
//    top_logprobs: [{token: logprob}], text_offset}, text_offset counting
//    bytes of the completion from its first token on (a token may end
//    inside a UTF-8 character, where a character count has no answer).
// `token` is the token's text (bytes that are not UTF-8 are replaced when
// the JSON is written; `bytes` keeps them exact). End-of-generation tokens
// are left out: they are not part of the reply's text, as in OpenAI's API.
// A stream reports the tokens behind each chunk, so the chunks' entries
// concatenate to the whole response's.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>

#include "sampling/logprobs.h"

namespace ds4 {

class Tokenizer;

class OpenAILogprobs {
public:
    explicit OpenAILogprobs(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

    // The entries of `content` for these tokens.
    nlohmann::json chat_content(std::span<const SampledLogprobs> tokens) const;
    // The legacy object for these tokens; text offsets continue from the
    // previous call's (a stream's chunks share one count).
    nlohmann::json completion(std::span<const SampledLogprobs> tokens);

private:
    std::string text_of(int32_t id) const;
    nlohmann::json bytes_of(const std::string& text) const;

    const Tokenizer& tokenizer_;
    int64_t offset_ = 0;
};

}  // namespace ds4

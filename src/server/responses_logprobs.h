// Which sampled tokens' log probabilities the Responses API reports: those
// of the message's output text (a reply's reasoning and tool calls carry
// none, as on OpenAI's API, where output_text parts and their delta events
// are the only places logprobs appear).
//
// The reply's raw text is the forced opening of a call (server/prompt.h),
// then each sampled token's bytes; the reply parser says where the answer
// begins in it, and the content is the answer's prefix. A token belongs to
// the output text when its bytes overlap the content's bytes, so a token
// cut across the reasoning's close marker and the answer's first letters
// counts, and one of only the whitespace before a tool call does not.
// End-of-generation tokens are never reported (server/openai_logprobs.h).
//
// Entries take chat's shape per token ({token, logprob, bytes,
// top_logprobs: [{token, logprob, bytes}]}), which is the output_text
// part's, and a superset of the delta event's {token, logprob,
// top_logprobs}: `bytes` lets a client rebuild text a token cut inside a
// UTF-8 character. A stream hands each output_text.delta the tokens whose
// first byte its text completes, so the deltas' entries concatenate to the
// part's.
#pragma once

#include <cstddef>
#include <deque>
#include <nlohmann/json.hpp>
#include <span>

#include "server/openai_logprobs.h"

namespace ds4 {

class ResponsesLogprobs {
public:
    // `first_byte`: where the first sampled token's bytes begin in the raw
    // text (the forced opening's length).
    ResponsesLogprobs(const Tokenizer& tokenizer, size_t first_byte);

    // The next sampled tokens, in order.
    void add(std::span<const SampledLogprobs> tokens);
    // The entries of the tokens added so far, not yet taken, whose first
    // byte lies before `end`, for those that overlap [begin, end) (the
    // others are dropped: reasoning, or a call's markup before content
    // resumes); tokens from `end` on wait for a later call.
    nlohmann::json take(size_t begin, size_t end);

private:
    struct Token {
        SampledLogprobs logprobs;
        size_t from, to;  // bytes in the raw text
    };

    const Tokenizer& tokenizer_;
    OpenAILogprobs format_;
    std::deque<Token> pending_;
    size_t next_byte_;
};

}  // namespace ds4

// The OpenAI request bodies the server accepts, parsed and checked: every
// field's type and range, unknown roles and empty conversations; a problem
// is an ApiError(400) naming the field. Fields ds4 does not implement yet
// (n > 1, response_format, the legacy `functions`) are refused by name
// rather than ignored. Log probabilities (chat: `logprobs` + `top_logprobs`;
// completions: `logprobs` as a count) set GenerateOptions::top_logprobs. Tools: server/tool_request.h; assistant messages may carry
// tool_calls (their arguments must be a JSON object's text), "tool"
// messages are tool results.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat.h"
#include "engine/generate.h"
#include "server/tool_request.h"

namespace ds4 {

struct CompletionRequest {
    std::string model;                   // echoed back
    bool chat = true;                    // /v1/chat/completions (messages) or /v1/completions (prompt)
    std::vector<ChatMessage> messages;   // chat
    std::string prompt;                  // completions
    ChatOptions chat_options;            // enable_thinking, reasoning_effort, tools (when active)
    RequestTools tools;                  // tools + tool_choice
    GenerateOptions generate;            // max_tokens, sampling, stop
    bool stream = false;
    bool include_usage = false;          // stream_options.include_usage
};

// Parses a request body. `max_tokens_default` applies when the request
// names no limit; sampling defaults are OpenAI's (temperature 1, top_p 1)
// with top_k and min_p off.
CompletionRequest parse_completion_request(const std::string& body, bool chat);

}  // namespace ds4

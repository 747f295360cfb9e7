// The Anthropic Messages request bodies the server accepts (POST
// /v1/messages and /v1/messages/count_tokens), parsed and checked: every
// field's type and range, roles, content blocks; a problem is an
// ApiError(400) naming the field. Blocks ds4 does not implement (images,
// documents, server tools) are refused by name rather than ignored.
//
// Tools: server/tool_request.h. An assistant's tool_use blocks become its
// tool calls (input printed as the templates print JSON); a user's
// tool_result blocks become "tool" messages, in block order with its text.
//
// `system` becomes a leading system message; assistant `thinking` blocks
// become the message's reasoning; a final assistant message is a prefill:
// its text ends the prompt and the reply continues it. `thinking` {"type":
// "enabled" | "adaptive"} turns the template's thinking mode on; without it
// (or "disabled") the template's no-thinking mode renders, as Anthropic's
// API thinks only when asked. budget_tokens is checked, not enforced (the
// reply's max_tokens bounds reasoning and answer together).
#pragma once

#include <string>
#include <vector>

#include "chat/chat.h"
#include "engine/generate.h"
#include "server/tool_request.h"

namespace ds4 {

struct AnthropicRequest {
    std::string model;                  // echoed back
    std::vector<ChatMessage> messages;  // the system prompt first, then the turns before any prefill
    std::string prefill;                // a final assistant message's text ("" when none)
    ChatOptions chat_options;           // enable_thinking, tools (when active)
    RequestTools tools;                 // tools + tool_choice
    GenerateOptions generate;           // max_tokens, sampling, stop_sequences
    bool stream = false;
};

// `count_only`: the count_tokens body (max_tokens not required; sampling
// fields, when sent, are checked all the same).
AnthropicRequest parse_anthropic_request(const std::string& body, bool count_only);

}  // namespace ds4

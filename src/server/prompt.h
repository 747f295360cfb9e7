// From a request's conversation to the prompt the scheduler runs, the one
// place both APIs render: the engine's chat template, a prefill appended
// (Anthropic's final assistant message), the tokens with BOS as the ds4
// program feeds them, and how the reply's reasoning is marked. A template
// or tokenizer refusal is an ApiError(400).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat.h"
#include "chat/thinking.h"
#include "chat/tool_calls.h"
#include "server/tool_request.h"

namespace ds4 {

class Engine;

struct ServerPrompt {
    std::vector<int32_t> tokens;
    std::optional<ThinkMarkers> think;  // the template's reasoning markers (none: raw)
    bool opens_thinking = false;        // the prompt ends inside a reasoning block (before `forced`)
    // Tools active: how the model writes calls; and when the request
    // demands a call, the opening of it the prompt ends with
    // (forced_tool_call_opening), which is also the start of the reply.
    ToolCallSyntax tool_syntax = ToolCallSyntax::none;
    std::string forced;
    ToolParamTypes tool_types;  // the offered tools' parameter types (GLM reads values by them)
};

// `param` names the request field a refusal points at ("messages").
// `tools`: the request's tools (null: none).
ServerPrompt chat_server_prompt(const Engine& engine, const std::vector<ChatMessage>& messages,
                                const ChatOptions& options, const std::string& prefill = {},
                                const RequestTools* tools = nullptr);
// /v1/completions: the text as is, with BOS and special tokens parsed.
ServerPrompt text_server_prompt(const Engine& engine, const std::string& text);

}  // namespace ds4

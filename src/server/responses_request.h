// The OpenAI Responses API request (POST /v1/responses), parsed and
// checked onto the conversation the chat renderer takes: every field's type
// and range, roles, item types; a problem is an ApiError(400) naming the
// field. Fields ds4 does not implement (previous_response_id and the other
// stored-state fields, background runs, structured output, hosted tools,
// non-text content) are refused by name rather than ignored.
//
// `instructions` becomes a leading system message. `input` is a string (one
// user message) or a list of items:
//  - messages {role, content}: user, system, developer (for templates that
//    know it, as on /v1/chat/completions) or assistant; content a string or
//    input_text / output_text parts joined;
//  - reasoning items (a thinking model's earlier output, sent back): the
//    reasoning of the assistant turn that follows them;
//  - function_call items {call_id, name, arguments}: calls of the assistant
//    turn they follow (or of a new one), call_id as the call's id, so the
//    sampled text of a call ds4 made is put back (tool_call_memory.h);
//  - function_call_output items {call_id, output}: "tool" messages.
// Sending a response's `output` back as the next request's input (the
// stateless way to continue) thereby renders the turn as it was sampled.
//
// Sampling defaults are OpenAI's (temperature 1, top_p 1; top_k, min_p off);
// `max_output_tokens` bounds the reply; `reasoning.effort` as chat's
// `reasoning_effort` ("none": the template's no-thinking mode).
// `include: ["message.output_text.logprobs"]` asks for the output text's
// log probabilities, with `top_logprobs` (0..20) alternatives each
// (generate.top_logprobs; -1 when not asked).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/chat.h"
#include "engine/generate.h"
#include "server/tool_request.h"

namespace ds4 {

struct ResponsesRequest {
    std::string model;                  // echoed back
    std::vector<ChatMessage> messages;  // instructions first, then the input items
    ChatOptions chat_options;           // enable_thinking, reasoning_effort, tools (when active)
    RequestTools tools;                 // tools + tool_choice
    GenerateOptions generate;           // max_output_tokens, sampling
    bool stream = false;
    // The settings the response object repeats (instructions, tools,
    // tool_choice, temperature, top_p, max_output_tokens, ...), as sent or
    // their defaults.
    nlohmann::json echo;
};

ResponsesRequest parse_responses_request(const std::string& body);

}  // namespace ds4

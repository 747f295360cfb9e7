// OpenAI Responses API responses from a generation: the whole `response`
// object, or its streamed event lifecycle as Server-Sent Events, each
// "event: NAME\ndata: JSON\n\n" with a sequence_number counting from 0:
//
//   response.created, response.in_progress,
//   per output item: response.output_item.added, then
//     message:       response.content_part.added, response.output_text.delta...,
//                    response.output_text.done, response.content_part.done
//     reasoning:     response.content_part.added, response.reasoning_text.delta...,
//                    response.reasoning_text.done, response.content_part.done
//     function_call: response.function_call_arguments.delta...,
//                    response.function_call_arguments.done
//   response.output_item.done;
//   then response.completed, or response.incomplete (max_output_tokens or
//   a full context), or response.failed (the generation failed or the
//   server is stopping), whose `response` holds every item.
//
// The output: a `reasoning` item when the reply reasons (chat/thinking.h;
// its text as a reasoning_text content part, as open-weight reasoning
// models return it), a `message` item with one output_text part (left out
// when the reply is only calls or only reasoning), and a `function_call`
// item per call (chat/reply_parser.h) with a fresh call_id, whose sampled
// text is remembered by it (server/tool_call_memory.h). As on
// /v1/chat/completions, a call the stream announced that never closes ends
// as an "incomplete" function_call item, and its text follows as a message.
//
// With log probabilities asked for (`include` names
// message.output_text.logprobs), the output_text part carries those of the
// tokens that wrote its text, and each output_text.delta those behind its
// piece (server/responses_logprobs.h); otherwise both carry [].
//
// Usage: input_tokens (the prompt, cached ones included),
// input_tokens_details.cached_tokens, output_tokens (sampled),
// output_tokens_details.reasoning_tokens (sampled up to the end of the
// reasoning), total_tokens.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/reply_parser.h"
#include "chat/thinking.h"
#include "engine/generate.h"
#include "server/responses_logprobs.h"
#include "server/server_context.h"

namespace ds4 {

class ToolCallMemory;
class Tokenizer;

struct ResponsesReplySetup {
    std::string id;      // "resp_..."
    std::string model;
    nlohmann::json echo;  // ResponsesRequest::echo: the settings the object repeats
    std::optional<ThinkMarkers> think;
    bool opens_thinking = false;
    ToolCallSyntax syntax = ToolCallSyntax::none;  // none: tools not active
    ToolCallMemory* memory = nullptr;              // may be null
    std::string forced;                            // the opening of a call the prompt ended with
    ToolParamTypes types;                          // the offered tools' parameter types
    const Tokenizer* tokenizer = nullptr;          // counts reasoning tokens (null: 0)
    // Report the output text's log probabilities (the generation was
    // submitted with top_logprobs >= 0); needs `tokenizer`.
    bool logprobs = false;
};

class ResponsesReply : public StreamFormat {
public:
    explicit ResponsesReply(ResponsesReplySetup setup);

    // The whole response object for a finished generation (not after streaming).
    nlohmann::json response(const GenerateResult& result);

    // StreamFormat: the events above.
    std::string begin(int64_t cached_tokens) override;
    void logprobs(std::span<const SampledLogprobs> tokens) override;
    std::string text(std::string_view piece) override;
    std::string keep_alive() override;
    std::string end(const GenerateResult& result) override;

private:
    enum class Kind { reasoning, message, function_call };
    struct Item {
        Kind kind;
        std::string id;
        std::string text;     // reasoning or output text; a call's arguments
        std::string call_id;  // function_call
        std::string name;     // function_call
        nlohmann::json logprobs = nlohmann::json::array();  // message: its text's tokens
    };

    std::string emit(const char* type, nlohmann::json data);
    std::string events(const std::vector<ReplyDelta>& deltas);
    std::string open(Kind kind, std::string name = {});
    std::string close(const char* status, bool next_is_call = false);
    nlohmann::json item_json(const Item& item, const char* status) const;
    nlohmann::json object(const char* status, const GenerateResult* result) const;
    nlohmann::json usage(const GenerateResult& result) const;
    const char* status(const GenerateResult& result) const;
    void remember();

    ResponsesReplySetup s_;
    ReplyParser parser_;
    int64_t created_;
    uint64_t sequence_ = 0;
    std::vector<Item> items_;          // the output so far
    std::vector<nlohmann::json> done_;  // each item as output_item.done gave it
    bool open_ = false;                // items_.back() is still open
    size_t calls_ = 0;                 // function_call items so far
    std::optional<ResponsesLogprobs> logprobs_;  // asked for
    size_t received_ = 0;              // log probabilities received through logprobs()
    size_t content_sent_ = 0;          // bytes of output text streamed, all message items
};

}  // namespace ds4

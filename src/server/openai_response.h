// OpenAI responses from a generation: the whole chat.completion /
// text_completion body, or the stream's chunks (a role chunk, deltas, the
// finish reason, usage when asked for, then [DONE]).
//
// With tools active the reply is read with chat/reply_parser.h: reasoning
// goes to `reasoning_content` (DeepSeek's field, which its API wants back
// on tool-calling turns), calls to `tool_calls` with fresh ids and
// finish_reason "tool_calls", streamed as delta.tool_calls[i] (id and name
// first, then function.arguments pieces). The sampled text of the calls is
// remembered by id (server/tool_call_memory.h). Without tools the text is
// returned as sampled, reasoning markers included.
//
// With log probabilities asked for (report_logprobs), the body's choice
// carries them all (server/openai_logprobs.h), and each streamed chunk
// those of the tokens sampled since the previous chunk; the finish chunk
// carries the rest (tokens whose text was held back or never came).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/reply_parser.h"
#include "engine/generate.h"
#include "server/openai_logprobs.h"
#include "server/server_context.h"

namespace ds4 {

class ToolCallMemory;

class OpenAIReply : public StreamFormat {
public:
    // `tools`: read the reply for calls in this syntax (with these
    // reasoning markers); unset: plain text. `memory` may be null.
    struct ToolReading {
        std::optional<ThinkMarkers> think;
        bool opens_thinking = false;
        ToolCallSyntax syntax = ToolCallSyntax::none;
        ToolCallMemory* memory = nullptr;
        // The forced opening of a call the prompt ended with
        // (server/prompt.h): the reply's first text.
        std::string forced = {};
        ToolParamTypes types = {};  // the offered tools' parameter types
    };
    OpenAIReply(bool chat, std::string id, std::string model, bool include_usage,
                std::optional<ToolReading> tools = std::nullopt);

    // Report the generation's log probabilities (it was submitted with
    // GenerateOptions::top_logprobs >= 0), their tokens spelled by `tokenizer`.
    void report_logprobs(const Tokenizer& tokenizer) { logprobs_.emplace(tokenizer); }

    // The whole response body for a finished generation (not after streaming).
    nlohmann::json body(const GenerateResult& result);

    // StreamFormat: "data: JSON\n\n" events.
    std::string begin(int64_t cached_tokens) override;
    void logprobs(std::span<const SampledLogprobs> tokens) override;
    std::string text(std::string_view piece) override;
    std::string keep_alive() override;
    std::string end(const GenerateResult& result) override;

private:
    std::string chunk(const nlohmann::json& delta_or_text, const nlohmann::json& finish);
    std::string event(const nlohmann::json& choices, const nlohmann::json& usage) const;
    std::string deltas(const std::vector<ReplyDelta>& ds);
    const char* finish(const GenerateResult& result) const;
    void remember() const;
    nlohmann::json logprobs_json(std::span<const SampledLogprobs> tokens);

    bool chat_;
    std::string id_, model_;
    bool include_usage_;
    std::optional<ToolReading> tools_;
    std::optional<ReplyParser> parser_;
    std::vector<std::string> call_ids_;
    int64_t created_;
    std::optional<OpenAILogprobs> logprobs_;
    std::vector<SampledLogprobs> pending_;  // received, not yet in a chunk
    size_t received_ = 0;                   // entries received through logprobs()
};

nlohmann::json openai_usage(const GenerateResult& result);

}  // namespace ds4

// Anthropic Messages responses from a generation: the whole message, or
// the stream's event lifecycle (message_start, then per content block
// content_block_start / content_block_delta / content_block_stop with a
// ping after the first start, then message_delta with the stop reason and
// usage, then message_stop; an `error` event when the generation fails).
// The reply's reasoning becomes a thinking block before the text block,
// split as it streams (chat/thinking.h). With tools active, each call the
// model writes (chat/reply_parser.h) becomes a tool_use block with a fresh
// id, its input streamed as input_json_delta pieces, and the stop reason
// "tool_use"; the sampled text of the calls is remembered by id
// (server/tool_call_memory.h).
//
// Usage follows Anthropic's accounting: input_tokens are the prompt tokens
// evaluated, cache_read_input_tokens those reused from a slot or the prefix
// cache (their sum is what count_tokens says), output_tokens those sampled.
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
#include "server/server_context.h"

namespace ds4 {

// "end_turn", "max_tokens", "stop_sequence" or
// "model_context_window_exceeded".
const char* anthropic_stop_reason(StopReason reason);

class ToolCallMemory;

class AnthropicReply : public StreamFormat {
public:
    // `syntax`: how the model writes calls (none: tools not active);
    // `memory` may be null; `forced`: the opening of a call the prompt
    // ended with (server/prompt.h), the reply's first text; `types`: the
    // offered tools' parameter types.
    AnthropicReply(std::string id, std::string model, int64_t prompt_tokens, std::optional<ThinkMarkers> think,
                   bool opens_thinking, ToolCallSyntax syntax = ToolCallSyntax::none, ToolCallMemory* memory = nullptr,
                   std::string forced = {}, ToolParamTypes types = {});

    // The whole message for a finished generation (not after streaming).
    nlohmann::json message(const GenerateResult& result);

    // StreamFormat: the events, each "event: NAME\ndata: JSON\n\n".
    std::string begin(int64_t cached_tokens) override;
    std::string text(std::string_view piece) override;
    std::string keep_alive() override;
    std::string end(const GenerateResult& result) override;

private:
    enum class Block { thinking, text, tool_use };
    std::string events(const std::vector<ReplyDelta>& deltas);
    std::string open_block(Block kind, const nlohmann::json& block);
    std::string close_block();
    nlohmann::json usage(int64_t cached_tokens, int64_t output_tokens) const;
    const char* stop_reason(const GenerateResult& result) const;
    void remember();

    std::string id_, model_;
    int64_t prompt_tokens_;
    ReplyParser parser_;
    ToolCallMemory* memory_;
    std::string forced_;
    std::vector<std::string> call_ids_;
    int block_ = -1;  // index of the open content block, -1 before the first
    std::optional<Block> open_;  // the open block's kind
    bool pinged_ = false;
    bool started_ = false;  // message_start sent
};

}  // namespace ds4

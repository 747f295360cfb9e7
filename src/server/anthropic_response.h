// Anthropic Messages responses from a generation: the whole message, or
// the stream's event lifecycle (message_start, then per content block
// content_block_start / content_block_delta / content_block_stop with a
// ping after the first start, then message_delta with the stop reason and
// usage, then message_stop; an `error` event when the generation fails).
// The reply's reasoning becomes a thinking block before the text block,
// split as it streams (chat/thinking.h).
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

#include "chat/thinking.h"
#include "engine/generate.h"
#include "server/server_context.h"

namespace ds4 {

// "end_turn", "max_tokens", "stop_sequence" or
// "model_context_window_exceeded".
const char* anthropic_stop_reason(StopReason reason);

class AnthropicReply : public StreamFormat {
public:
    AnthropicReply(std::string id, std::string model, int64_t prompt_tokens, std::optional<ThinkMarkers> think,
                   bool opens_thinking);

    // The whole message for a finished generation (not after streaming).
    nlohmann::json message(const GenerateResult& result);

    // StreamFormat: the events, each "event: NAME\ndata: JSON\n\n".
    std::string begin(int64_t cached_tokens) override;
    std::string text(std::string_view piece) override;
    std::string keep_alive() override;
    std::string end(const GenerateResult& result) override;

private:
    std::string events(const std::vector<ThinkingSplitter::Piece>& pieces);
    std::string close_block();
    nlohmann::json usage(int64_t cached_tokens, int64_t output_tokens) const;

    std::string id_, model_;
    int64_t prompt_tokens_;
    ThinkingSplitter split_;
    int block_ = -1;  // index of the open content block, -1 before the first
    std::optional<ThinkingSplitter::Part> open_;  // the open block's kind
    bool pinged_ = false;
    bool started_ = false;  // message_start sent
};

}  // namespace ds4

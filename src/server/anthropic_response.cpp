#include "server/anthropic_response.h"

#include "server/api_error.h"

namespace ds4 {

namespace {

using json = nlohmann::json;
using Part = ThinkingSplitter::Part;

std::string event(const char* name, const json& data) {
    return std::string("event: ") + name + "\ndata: " + dump_json(data) + "\n\n";
}

json empty_block(Part part) {
    if (part == Part::thinking) return {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
    return {{"type", "text"}, {"text", ""}};
}

}  // namespace

const char* anthropic_stop_reason(StopReason reason) {
    switch (reason) {
        case StopReason::stop_string: return "stop_sequence";
        case StopReason::max_tokens: return "max_tokens";
        case StopReason::context_full: return "model_context_window_exceeded";
        default: return "end_turn";
    }
}

AnthropicReply::AnthropicReply(std::string id, std::string model, int64_t prompt_tokens, std::optional<ThinkMarkers> think,
                               bool opens_thinking)
    : id_(std::move(id)), model_(std::move(model)), prompt_tokens_(prompt_tokens), split_(think, opens_thinking) {}

json AnthropicReply::usage(int64_t cached, int64_t output) const {
    return {{"input_tokens", prompt_tokens_ - cached},
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", cached},
            {"output_tokens", output}};
}

json AnthropicReply::message(const GenerateResult& r) {
    std::vector<ThinkingSplitter::Piece> pieces = split_.push(r.text);
    for (auto& p : split_.finish()) pieces.push_back(std::move(p));
    json content = json::array();
    std::optional<Part> last;
    for (const auto& p : pieces) {
        if (p.part != last) content.push_back(empty_block(p.part));
        content.back()[p.part == Part::thinking ? "thinking" : "text"] =
            content.back()[p.part == Part::thinking ? "thinking" : "text"].get<std::string>() + p.text;
        last = p.part;
    }
    if (content.empty()) content.push_back(empty_block(Part::answer));  // as a stream with no text shows it
    return {{"id", id_},
            {"type", "message"},
            {"role", "assistant"},
            {"model", model_},
            {"content", content},
            {"stop_reason", anthropic_stop_reason(r.reason)},
            {"stop_sequence", r.reason == StopReason::stop_string ? json(r.stop_string) : json(nullptr)},
            {"usage", usage(r.cached_tokens, static_cast<int64_t>(r.tokens.size()))}};
}

std::string AnthropicReply::begin(int64_t cached) {
    started_ = true;
    const json message = {{"id", id_},          {"type", "message"},          {"role", "assistant"},
                          {"model", model_},    {"content", json::array()},   {"stop_reason", nullptr},
                          {"stop_sequence", nullptr}, {"usage", usage(cached, 0)}};
    return event("message_start", {{"type", "message_start"}, {"message", message}});
}

std::string AnthropicReply::close_block() {
    if (!open_) return {};
    open_.reset();
    return event("content_block_stop", {{"type", "content_block_stop"}, {"index", block_}});
}

std::string AnthropicReply::events(const std::vector<ThinkingSplitter::Piece>& pieces) {
    std::string out;
    for (const auto& p : pieces) {
        if (open_ != p.part) {
            out += close_block();
            ++block_;
            open_ = p.part;
            out += event("content_block_start",
                         {{"type", "content_block_start"}, {"index", block_}, {"content_block", empty_block(p.part)}});
            if (!pinged_) {
                out += event("ping", {{"type", "ping"}});
                pinged_ = true;
            }
        }
        if (p.text.empty()) continue;
        const json delta = p.part == Part::thinking ? json{{"type", "thinking_delta"}, {"thinking", p.text}}
                                                    : json{{"type", "text_delta"}, {"text", p.text}};
        out += event("content_block_delta", {{"type", "content_block_delta"}, {"index", block_}, {"delta", delta}});
    }
    return out;
}

std::string AnthropicReply::text(std::string_view piece) { return events(split_.push(piece)); }

std::string AnthropicReply::keep_alive() {
    // Before message_start an SSE comment (clients expect that event first);
    // after it Anthropic's own keep-alive, a ping event.
    return started_ ? event("ping", {{"type", "ping"}}) : ": keep-alive\n\n";
}

std::string AnthropicReply::end(const GenerateResult& r) {
    if (r.reason == StopReason::failed || r.reason == StopReason::cancelled) {
        const std::string why = r.reason == StopReason::failed ? r.error : "the generation was cancelled (the server is stopping).";
        return event("error", json::parse(anthropic_error_body(500, why)));
    }
    std::string out = events(split_.finish());
    if (block_ < 0) out += events({{Part::answer, ""}});  // no text at all: one empty text block
    out += close_block();
    json u = usage(r.cached_tokens, static_cast<int64_t>(r.tokens.size()));
    out += event("message_delta",
                 {{"type", "message_delta"},
                  {"delta",
                   {{"stop_reason", anthropic_stop_reason(r.reason)},
                    {"stop_sequence", r.reason == StopReason::stop_string ? json(r.stop_string) : json(nullptr)}}},
                  {"usage", u}});
    out += event("message_stop", {{"type", "message_stop"}});
    return out;
}

}  // namespace ds4

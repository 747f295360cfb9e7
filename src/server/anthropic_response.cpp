#include "server/anthropic_response.h"

#include "server/api_error.h"
#include "server/tool_call_memory.h"

namespace ds4 {

namespace {

using json = nlohmann::json;

std::string event(const char* name, const json& data) {
    return std::string("event: ") + name + "\ndata: " + dump_json(data) + "\n\n";
}

json thinking_block() { return {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}; }
json text_block() { return {{"type", "text"}, {"text", ""}}; }
json tool_use_block(const std::string& id, const std::string& name) {
    return {{"type", "tool_use"}, {"id", id}, {"name", name}, {"input", json::object()}};
}

// A call's input as an object (arguments that are not one: empty).
json input_of(const std::string& arguments) {
    json input = json::parse(arguments, nullptr, false);
    return input.is_object() ? input : json::object();
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
                               bool opens_thinking, ToolCallSyntax syntax, ToolCallMemory* memory, std::string forced,
                               ToolParamTypes types)
    : id_(std::move(id)), model_(std::move(model)), prompt_tokens_(prompt_tokens),
      parser_(think, opens_thinking, syntax, std::move(types)), memory_(memory), forced_(std::move(forced)) {}

json AnthropicReply::usage(int64_t cached, int64_t output) const {
    return {{"input_tokens", prompt_tokens_ - cached},
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", cached},
            {"output_tokens", output}};
}

const char* AnthropicReply::stop_reason(const GenerateResult& r) const {
    return parser_.reply().tool_calls.empty() ? anthropic_stop_reason(r.reason) : "tool_use";
}

void AnthropicReply::remember() {
    if (!memory_) return;
    const Reply& reply = parser_.reply();
    std::vector<ChatToolCall> calls;
    for (size_t i = 0; i < reply.tool_calls.size() && i < call_ids_.size(); ++i)
        calls.push_back({reply.tool_calls[i].name, reply.tool_calls[i].arguments, call_ids_[i]});
    memory_->remember(calls, reply.tool_section);
}

json AnthropicReply::message(const GenerateResult& r) {
    std::vector<ReplyDelta> ds = parser_.push(forced_ + r.text);
    for (ReplyDelta& d : parser_.finish()) ds.push_back(std::move(d));
    for (const ReplyDelta& d : ds)
        if (d.kind == ReplyDelta::Kind::call_start) call_ids_.push_back(new_tool_call_id("toolu_"));
    const Reply& reply = parser_.reply();
    json content = json::array();
    if (!reply.reasoning.empty()) {
        json b = thinking_block();
        b["thinking"] = reply.reasoning;
        content.push_back(b);
    }
    if (!reply.content.empty() || (reply.reasoning.empty() && reply.tool_calls.empty())) {
        // (a reply with nothing at all shows one empty text block, as a stream does)
        json b = text_block();
        b["text"] = reply.content;
        content.push_back(b);
    }
    for (size_t i = 0; i < reply.tool_calls.size(); ++i) {
        json b = tool_use_block(call_ids_[i], reply.tool_calls[i].name);
        b["input"] = input_of(reply.tool_calls[i].arguments);
        content.push_back(b);
    }
    remember();
    return {{"id", id_},
            {"type", "message"},
            {"role", "assistant"},
            {"model", model_},
            {"content", content},
            {"stop_reason", stop_reason(r)},
            {"stop_sequence", r.reason == StopReason::stop_string ? json(r.stop_string) : json(nullptr)},
            {"usage", usage(r.cached_tokens, static_cast<int64_t>(r.tokens.size()))}};
}

std::string AnthropicReply::begin(int64_t cached) {
    started_ = true;
    const json message = {{"id", id_},          {"type", "message"},          {"role", "assistant"},
                          {"model", model_},    {"content", json::array()},   {"stop_reason", nullptr},
                          {"stop_sequence", nullptr}, {"usage", usage(cached, 0)}};
    return event("message_start", {{"type", "message_start"}, {"message", message}}) + events(parser_.push(forced_));
}

std::string AnthropicReply::close_block() {
    if (!open_) return {};
    open_.reset();
    return event("content_block_stop", {{"type", "content_block_stop"}, {"index", block_}});
}

std::string AnthropicReply::open_block(Block kind, const json& block) {
    std::string out = close_block();
    ++block_;
    open_ = kind;
    out += event("content_block_start", {{"type", "content_block_start"}, {"index", block_}, {"content_block", block}});
    if (!pinged_) {
        out += event("ping", {{"type", "ping"}});
        pinged_ = true;
    }
    return out;
}

std::string AnthropicReply::events(const std::vector<ReplyDelta>& deltas) {
    std::string out;
    for (const ReplyDelta& d : deltas) {
        json delta;
        switch (d.kind) {
            case ReplyDelta::Kind::reasoning:
                if (open_ != Block::thinking) out += open_block(Block::thinking, thinking_block());
                delta = {{"type", "thinking_delta"}, {"thinking", d.text}};
                break;
            case ReplyDelta::Kind::content:
                if (open_ != Block::text) out += open_block(Block::text, text_block());
                delta = {{"type", "text_delta"}, {"text", d.text}};
                break;
            case ReplyDelta::Kind::call_start:
                call_ids_.push_back(new_tool_call_id("toolu_"));
                out += open_block(Block::tool_use, tool_use_block(call_ids_.back(), d.text));
                continue;
            case ReplyDelta::Kind::call_arguments:
                delta = {{"type", "input_json_delta"}, {"partial_json", d.text}};
                break;
        }
        out += event("content_block_delta", {{"type", "content_block_delta"}, {"index", block_}, {"delta", delta}});
    }
    return out;
}

std::string AnthropicReply::text(std::string_view piece) { return events(parser_.push(piece)); }

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
    std::string out = events(parser_.finish());
    if (block_ < 0) out += open_block(Block::text, text_block());  // no text at all: one empty text block
    out += close_block();
    remember();
    json u = usage(r.cached_tokens, static_cast<int64_t>(r.tokens.size()));
    out += event("message_delta",
                 {{"type", "message_delta"},
                  {"delta",
                   {{"stop_reason", stop_reason(r)},
                    {"stop_sequence", r.reason == StopReason::stop_string ? json(r.stop_string) : json(nullptr)}}},
                  {"usage", u}});
    out += event("message_stop", {{"type", "message_stop"}});
    return out;
}

}  // namespace ds4

// Fuzz target for the server's request parsers: any bytes parse to a
// request or give an ApiError with a 4xx status and a message, never
// another exception or a crash; what parses keeps the parser's promises (a
// conversation has messages, sampling parameters a Sampler accepts, a limit
// >= -1, an Anthropic request a max_tokens unless it only counts tokens)
// and its error bodies are valid JSON in both APIs' shapes; a parsed
// conversation (tools and tool calls included) renders with both families'
// templates or is refused with a ds4::Error, never anything else. The first
// byte picks the parser: OpenAI chat or completions (or, with bit 3 set,
// the Responses API: the seeds older than it keep their meaning),
// Anthropic messages or count_tokens; its other bits pick how the same
// bytes, read as a model's reply, are cut into two streamed pieces: the
// reply parser's deltas must add up to the whole reply's content and calls
// (chat/reply_parser.h), for Qwen3 or DeepSeek V4 (bit 2) and, for every
// input, both GLM syntaxes (whose tags sit in the same bytes at no cost to
// the older seeds).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/chat.h"
#include "fuzz_support.h"
#include "chat/reply_parser.h"
#include "common/error.h"
#include "sampling/sampler.h"
#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/responses_request.h"

namespace {

void check_sampling(const ds4::GenerateOptions& g) {
    FUZZ_REQUIRE(g.max_tokens >= -1);
    FUZZ_REQUIRE(g.top_logprobs >= -1 && g.top_logprobs <= ds4::kMaxTopLogprobs);
    ds4::Sampler check(g.sampling);  // throws if the parser let a bad value through
    (void)check;
}

void render(const std::vector<ds4::ChatMessage>& messages, const ds4::ChatOptions& options) {
    for (const char* name : {"qwen3", "deepseek4", "glm-4.6", "glm-4.7"}) {
        try {
            ds4::render_chat(name, messages, options);
        } catch (const ds4::Error&) {
            // a refusal in one sentence is fine
        }
    }
}

// The body as a model's reply in the syntax (and reasoning markers) of
// template `name`, streamed in two pieces cut at `cut`.
void reply(const std::string& text, size_t cut, const char* name, bool opens_thinking) {
    const auto syntax = ds4::tool_call_syntax(name);
    const std::optional<ds4::ThinkMarkers> markers = ds4::think_markers(name);
    FUZZ_REQUIRE(markers.has_value());
    // GLM reads argument values by the tools' schemas: one string, one integer.
    const ds4::ToolParamTypes types(
        R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": )"
        R"({"s": {"type": "string"}, "n": {"type": "integer"}}}}}])");
    ds4::ReplyParser whole(markers, opens_thinking, syntax, types);
    whole.push(text);
    whole.finish();
    ds4::ReplyParser streamed(markers, opens_thinking, syntax, types);
    std::string content;
    std::vector<std::string> names, args;
    auto add = [&](const std::vector<ds4::ReplyDelta>& ds) {
        for (const ds4::ReplyDelta& d : ds) {
            if (d.kind == ds4::ReplyDelta::Kind::content) content += d.text;
            if (d.kind == ds4::ReplyDelta::Kind::call_start) {
                FUZZ_REQUIRE(d.call == names.size());
                names.push_back(d.text);
                args.emplace_back();
            }
            if (d.kind == ds4::ReplyDelta::Kind::call_arguments) {
                FUZZ_REQUIRE(d.call < args.size());
                args[d.call] += d.text;
            }
        }
    };
    cut = std::min(cut, text.size());
    add(streamed.push(text.substr(0, cut)));
    add(streamed.push(text.substr(cut)));
    add(streamed.finish());
    const ds4::Reply& w = whole.reply();
    FUZZ_REQUIRE(content == w.content);
    FUZZ_REQUIRE(streamed.reply().tool_section == w.tool_section);
    FUZZ_REQUIRE(names.size() >= w.tool_calls.size());
    for (size_t i = 0; i < w.tool_calls.size(); ++i) {
        FUZZ_REQUIRE(names[i] == w.tool_calls[i].name);
        FUZZ_REQUIRE(args[i] == w.tool_calls[i].arguments);
    }
}

void openai(const std::string& body, bool chat) {
    const ds4::CompletionRequest r = ds4::parse_completion_request(body, chat);
    FUZZ_REQUIRE(r.chat == chat);
    if (chat) FUZZ_REQUIRE(!r.messages.empty());
    if (chat) FUZZ_REQUIRE(r.tools.active() == !r.chat_options.tools.empty());
    check_sampling(r.generate);
    if (chat) render(r.messages, r.chat_options);
}

void responses(const std::string& body) {
    const ds4::ResponsesRequest r = ds4::parse_responses_request(body);
    FUZZ_REQUIRE(!r.messages.empty());
    for (const ds4::ChatMessage& m : r.messages)
        FUZZ_REQUIRE(m.role == "system" || m.role == "developer" || m.role == "user" || m.role == "assistant" ||
                     m.role == "tool");
    FUZZ_REQUIRE(r.tools.active() == !r.chat_options.tools.empty());
    FUZZ_REQUIRE(r.generate.max_tokens == -1 || r.generate.max_tokens >= 1);
    FUZZ_REQUIRE(r.echo.is_object());
    check_sampling(r.generate);
    render(r.messages, r.chat_options);
}

void anthropic(const std::string& body, bool count_only) {
    const ds4::AnthropicRequest r = ds4::parse_anthropic_request(body, count_only);
    FUZZ_REQUIRE(!r.messages.empty());
    FUZZ_REQUIRE(r.messages.back().role == "user" || r.messages.back().role == "assistant" ||
                 r.messages.back().role == "tool");
    for (const ds4::ChatMessage& m : r.messages)
        FUZZ_REQUIRE(m.role == "system" || m.role == "user" || m.role == "assistant" || m.role == "tool");
    if (!count_only) FUZZ_REQUIRE(r.generate.max_tokens >= 1);
    FUZZ_REQUIRE(r.generate.stop.size() <= 16);
    check_sampling(r.generate);
    render(r.messages, r.chat_options);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const int which = data[0] & 3;
    const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
    const size_t cut = body.size() * (data[0] >> 4) / 15;
    const bool opens_thinking = (data[0] & 8) != 0;
    reply(body, cut, (data[0] & 4) != 0 ? "qwen3" : "deepseek4", opens_thinking);
    reply(body, cut, "glm-4.6", opens_thinking);
    reply(body, cut, "glm-4.7", opens_thinking);
    try {
        if (which == 1 && (data[0] & 8)) responses(body);
        else if (which < 2) openai(body, which == 0);
        else anthropic(body, which == 3);
    } catch (const ds4::ApiError& e) {
        FUZZ_REQUIRE(e.status() >= 400 && e.status() < 500);
        FUZZ_REQUIRE(std::string(e.what()).size() > 0);
        FUZZ_REQUIRE(nlohmann::json::accept(ds4::openai_error_body(e.status(), e.what(), e.param())));
        const nlohmann::json a = nlohmann::json::parse(ds4::anthropic_error_body(e.status(), e.what()));
        FUZZ_REQUIRE(a["type"] == "error" && a["error"]["type"] == "invalid_request_error");
    }
    return 0;
}

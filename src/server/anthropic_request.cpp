#include "server/anthropic_request.h"

#include <limits>

#include "chat/python_json.h"
#include "server/api_error.h"
#include "server/json_fields.h"

namespace ds4 {

namespace {

constexpr size_t kMaxStopSequences = 16;

std::string block_type(const json& block) {
    return block.is_object() && block.contains("type") && block["type"].is_string() ? block["type"].get<std::string>()
                                                                                   : std::string();
}

// The text of a {"type": "text", "text": ...} block (cache_control and
// citations are accepted and have no effect here).
std::string text_of(const json& block, const std::string& where) {
    if (!block.contains("text") || !block["text"].is_string()) bad_field(where + ".text", "'" + where + ".text' must be a string.");
    return block["text"].get<std::string>();
}

[[noreturn]] void unsupported_block(const std::string& type, const std::string& where) {
    if (type == "tool_use" || type == "tool_result")
        bad_field(where, "'" + where + "' is a " + type + " block, which only " +
                             (type == "tool_use" ? "assistant" : "user") + " messages may hold.");
    if (type == "server_tool_use")
        bad_field(where, "'" + where + "' is a server_tool_use block; ds4 runs client tools only.");
    if (type.empty()) bad_field(where, "'" + where + "' must be a content block object with a 'type'.");
    bad_field(where, "'" + where + "' is a " + type + " block; ds4 reads text and thinking blocks only.");
}

std::string system_text(const json& s) {
    if (s.is_string()) return s.get<std::string>();
    if (!s.is_array()) bad_field("system", "'system' must be a string or an array of text blocks.");
    std::string text;
    for (size_t i = 0; i < s.size(); ++i) {
        const std::string where = "system[" + std::to_string(i) + "]";
        if (block_type(s[i]) != "text") bad_field(where, "'" + where + "' must be a text block.");
        text += text_of(s[i], where);
    }
    return text;
}

// A tool_result's content: a string or text blocks joined.
std::string tool_result_text(const json& block, const std::string& where) {
    if (!block.contains("content") || block["content"].is_null()) return "";
    const json& c = block["content"];
    if (c.is_string()) return c.get<std::string>();
    if (!c.is_array()) bad_field(where + ".content", "'" + where + ".content' must be a string or an array of text blocks.");
    std::string text;
    for (size_t i = 0; i < c.size(); ++i) {
        const std::string w = where + ".content[" + std::to_string(i) + "]";
        if (block_type(c[i]) != "text") bad_field(w, "'" + w + "' must be a text block; ds4 reads text only.");
        text += text_of(c[i], w);
    }
    return text;
}

// One message, appended to `out`: text blocks joined as the content,
// thinking blocks (an assistant's) joined as its reasoning, tool_use blocks
// (an assistant's) as its calls; a user's tool_result blocks each become a
// "tool" message, its text around them user messages, in block order.
// `ordered` is the same message with its keys in the order sent.
void message(const json& msg, const nlohmann::ordered_json& ordered, const std::string& where,
             std::vector<ChatMessage>& out) {
    if (!msg.is_object()) bad_field(where, "'" + where + "' must be an object.");
    if (!msg.contains("role") || !msg["role"].is_string()) bad_field(where + ".role", "'" + where + ".role' must be a string.");
    ChatMessage cm;
    cm.role = msg["role"].get<std::string>();
    if (cm.role != "user" && cm.role != "assistant")
        bad_field(where + ".role", "'" + where + ".role' must be user or assistant (the system prompt is the top-level 'system').");
    if (!msg.contains("content")) bad_field(where + ".content", "'" + where + ".content' is required.");
    const json& c = msg["content"];
    if (c.is_string()) {
        cm.content = c.get<std::string>();
        out.push_back(std::move(cm));
        return;
    }
    if (!c.is_array()) bad_field(where + ".content", "'" + where + ".content' must be a string or an array of content blocks.");
    bool had_tool_results = false;  // then `cm` holds only the text after the last one
    for (size_t i = 0; i < c.size(); ++i) {
        const std::string w = where + ".content[" + std::to_string(i) + "]";
        const std::string type = block_type(c[i]);
        if (type == "text") {
            cm.content += text_of(c[i], w);
        } else if (type == "thinking" && cm.role == "assistant") {
            if (!c[i].contains("thinking") || !c[i]["thinking"].is_string())
                bad_field(w + ".thinking", "'" + w + ".thinking' must be a string.");
            cm.reasoning_content = cm.reasoning_content.value_or("") + c[i]["thinking"].get<std::string>();
        } else if (type == "tool_use" && cm.role == "assistant") {
            ChatToolCall call;
            if (!c[i].contains("id") || !c[i]["id"].is_string()) bad_field(w + ".id", "'" + w + ".id' must be a string.");
            call.id = c[i]["id"].get<std::string>();
            if (!c[i].contains("name") || !c[i]["name"].is_string() || c[i]["name"].get<std::string>().empty())
                bad_field(w + ".name", "'" + w + ".name' must be a non-empty string.");
            call.name = c[i]["name"].get<std::string>();
            if (!c[i].contains("input") || !c[i]["input"].is_object())
                bad_field(w + ".input", "'" + w + ".input' must be an object.");
            call.arguments = python_json_dumps(ordered["content"][i]["input"]);
            cm.tool_calls.push_back(std::move(call));
        } else if (type == "tool_result" && cm.role == "user") {
            if (!c[i].contains("tool_use_id") || !c[i]["tool_use_id"].is_string())
                bad_field(w + ".tool_use_id", "'" + w + ".tool_use_id' must be a string.");
            if (!cm.content.empty()) out.push_back(std::move(cm));
            cm = ChatMessage{"tool", tool_result_text(c[i], w), std::nullopt};
            out.push_back(std::move(cm));
            cm = ChatMessage{"user", "", std::nullopt};
            had_tool_results = true;
        } else if (type == "redacted_thinking" && cm.role == "assistant") {
            // Encrypted reasoning from Anthropic's own models: nothing ds4 can render.
        } else {
            unsupported_block(type, w);
        }
    }
    // A user message that only carried tool results adds no empty user turn.
    if (!had_tool_results || !cm.content.empty()) out.push_back(std::move(cm));
}

void parse_thinking(const json& j, AnthropicRequest& r) {
    r.chat_options.enable_thinking = false;
    if (!present(j, "thinking")) return;
    const json& t = j["thinking"];
    if (!t.is_object() || !t.contains("type") || !t["type"].is_string())
        bad_field("thinking", "'thinking' must be an object with a 'type' (enabled, adaptive or disabled).");
    const std::string type = t["type"].get<std::string>();
    if (type == "disabled") return;
    if (type != "enabled" && type != "adaptive")
        bad_field("thinking.type", "'thinking.type' must be enabled, adaptive or disabled.");
    if (type == "enabled") {
        if (!t.contains("budget_tokens")) bad_field("thinking.budget_tokens", "'thinking.budget_tokens' is required when thinking is enabled.");
        integer_field(t, "budget_tokens", 1, std::numeric_limits<int32_t>::max(), "thinking.budget_tokens");
    }
    r.chat_options.enable_thinking = true;
}

void parse_sampling(const json& j, AnthropicRequest& r, bool count_only) {
    if (!count_only && !present(j, "max_tokens")) bad_field("max_tokens", "'max_tokens' is required.");
    if (present(j, "max_tokens")) r.generate.max_tokens = integer_field(j, "max_tokens", 1, std::numeric_limits<int32_t>::max());
    // Anthropic's defaults: temperature 1, top_p and top_k off.
    SamplerParams& s = r.generate.sampling;
    s.temperature = 1.0f;
    s.top_p = 1.0f;
    s.top_k = 0;
    s.min_p = 0.0f;
    if (present(j, "temperature")) s.temperature = float(number_field(j, "temperature", 0.0, 1.0));
    if (present(j, "top_p")) {
        s.top_p = float(number_field(j, "top_p", 0.0, 1.0));
        if (s.top_p <= 0.0f) bad_field("top_p", "'top_p' must be greater than 0.");
    }
    if (present(j, "top_k")) s.top_k = int(integer_field(j, "top_k", 0, 1 << 30));
    if (present(j, "stop_sequences")) {
        const json& st = j["stop_sequences"];
        if (!st.is_array() || st.size() > kMaxStopSequences)
            bad_field("stop_sequences", "'stop_sequences' must be an array of up to 16 strings.");
        for (const json& x : st) {
            if (!x.is_string() || x.get<std::string>().empty())
                bad_field("stop_sequences", "'stop_sequences' must hold non-empty strings.");
            r.generate.stop.push_back(x.get<std::string>());
        }
    }
    if (present(j, "stream")) r.stream = boolean_field(j, "stream");
    // llama.cpp's and vLLM's extension: never sample an end-of-generation token.
    if (present(j, "ignore_eos")) r.generate.ignore_eos = boolean_field(j, "ignore_eos");
}

}  // namespace

AnthropicRequest parse_anthropic_request(const std::string& body, bool count_only) {
    const json j = parse_json_object(body);
    AnthropicRequest r;
    if (present(j, "model")) r.model = string_field(j, "model");
    if (present(j, "system")) {
        std::string s = system_text(j["system"]);
        if (!s.empty()) {
            ChatMessage m;
            m.role = "system";
            m.content = std::move(s);
            r.messages.push_back(std::move(m));
        }
    }
    if (!j.contains("messages")) bad_field("messages", "'messages' is required.");
    const json& m = j["messages"];
    if (!m.is_array() || m.empty()) bad_field("messages", "'messages' must be a non-empty array.");
    // The body with its keys in the order sent (tool inputs and schemas are
    // printed into the prompt in that order).
    const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(body);
    for (size_t i = 0; i < m.size(); ++i)
        message(m[i], ordered["messages"][i], "messages[" + std::to_string(i) + "]", r.messages);
    if (r.messages.back().role == "assistant") {
        // A prefill: the reply continues this text.
        if (r.messages.back().reasoning_content)
            bad_field("messages", "the final assistant message (a prefill) cannot hold thinking blocks.");
        if (!r.messages.back().tool_calls.empty())
            bad_field("messages", "the final assistant message (a prefill) cannot hold tool_use blocks; send their tool_result blocks in a user message.");
        r.prefill = std::move(r.messages.back().content);
        r.messages.pop_back();
        if (r.messages.empty() || r.messages.back().role == "system")
            bad_field("messages", "'messages' needs a user message before a final assistant message.");
    }
    r.tools = parse_anthropic_tools(ordered);
    if (r.tools.active()) r.chat_options.tools = r.tools.specs;
    const ToolChoice::Mode mode = r.tools.choice.mode;
    if (!r.prefill.empty() && (mode == ToolChoice::Mode::required || mode == ToolChoice::Mode::function))
        bad_field("tool_choice", "'tool_choice' demands a tool call, which cannot follow a prefill (a final assistant message).");
    if (present(j, "metadata") && !j["metadata"].is_object()) bad_field("metadata", "'metadata' must be an object.");
    parse_thinking(j, r);
    parse_sampling(j, r, count_only);
    return r;
}

}  // namespace ds4

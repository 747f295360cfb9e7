#include "server/anthropic_request.h"

#include <limits>

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
    if (type == "tool_use" || type == "tool_result" || type == "server_tool_use")
        bad_field(where, "'" + where + "' is a " + type + " block; tools are not supported by this server yet.");
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

// One message: text blocks joined as the content, thinking blocks (an
// assistant's) joined as its reasoning.
ChatMessage message(const json& msg, const std::string& where) {
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
        return cm;
    }
    if (!c.is_array()) bad_field(where + ".content", "'" + where + ".content' must be a string or an array of content blocks.");
    for (size_t i = 0; i < c.size(); ++i) {
        const std::string w = where + ".content[" + std::to_string(i) + "]";
        const std::string type = block_type(c[i]);
        if (type == "text") {
            cm.content += text_of(c[i], w);
        } else if (type == "thinking" && cm.role == "assistant") {
            if (!c[i].contains("thinking") || !c[i]["thinking"].is_string())
                bad_field(w + ".thinking", "'" + w + ".thinking' must be a string.");
            cm.reasoning_content = cm.reasoning_content.value_or("") + c[i]["thinking"].get<std::string>();
        } else {
            unsupported_block(type, w);
        }
    }
    return cm;
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
    for (size_t i = 0; i < m.size(); ++i) r.messages.push_back(message(m[i], "messages[" + std::to_string(i) + "]"));
    if (r.messages.back().role == "assistant") {
        // A prefill: the reply continues this text.
        if (r.messages.back().reasoning_content)
            bad_field("messages", "the final assistant message (a prefill) cannot hold thinking blocks.");
        r.prefill = std::move(r.messages.back().content);
        r.messages.pop_back();
        if (r.messages.empty() || r.messages.back().role == "system")
            bad_field("messages", "'messages' needs a user message before a final assistant message.");
    }
    if (present(j, "tools") && !(j["tools"].is_array() && j["tools"].empty()))
        bad_field("tools", "'tools' is not supported by this server yet.");
    if (present(j, "tool_choice")) {
        const json& tc = j["tool_choice"];
        if (!tc.is_object() || !tc.contains("type") || !(tc["type"] == "auto" || tc["type"] == "none"))
            bad_field("tool_choice", "'tool_choice' is not supported by this server yet (only auto and none, with no tools).");
    }
    if (present(j, "metadata") && !j["metadata"].is_object()) bad_field("metadata", "'metadata' must be an object.");
    parse_thinking(j, r);
    parse_sampling(j, r, count_only);
    return r;
}

}  // namespace ds4

#include "server/openai_request.h"

#include <limits>

#include "sampling/sampler.h"
#include "server/api_error.h"
#include "server/json_fields.h"

namespace ds4 {

namespace {

// Message content: a string, or an array of {"type": "text", "text": ...}
// parts joined (other part types, e.g. images, are refused).
std::string content_text(const json& c, const std::string& where) {
    if (c.is_null()) return "";
    if (c.is_string()) return c.get<std::string>();
    if (!c.is_array()) bad_field(where, "'" + where + "' must be a string or an array of text parts.");
    std::string text;
    for (const json& part : c) {
        if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
            !part["text"].is_string())
            bad_field(where, "'" + where + "' holds a part that is not {\"type\": \"text\", \"text\": ...}; ds4 reads text only.");
        text += part["text"].get<std::string>();
    }
    return text;
}

std::vector<ChatMessage> messages(const json& j) {
    if (!j.contains("messages")) bad_field("messages", "'messages' is required.");
    const json& m = j["messages"];
    if (!m.is_array() || m.empty()) bad_field("messages", "'messages' must be a non-empty array.");
    std::vector<ChatMessage> out;
    for (size_t i = 0; i < m.size(); ++i) {
        const std::string where = "messages[" + std::to_string(i) + "]";
        const json& msg = m[i];
        if (!msg.is_object()) bad_field(where, "'" + where + "' must be an object.");
        if (!msg.contains("role") || !msg["role"].is_string()) bad_field(where + ".role", "'" + where + ".role' must be a string.");
        ChatMessage cm;
        cm.role = msg["role"].get<std::string>();
        if (cm.role != "system" && cm.role != "user" && cm.role != "assistant" && cm.role != "tool" &&
            cm.role != "developer")
            bad_field(where + ".role", "'" + where + ".role' must be system, developer, user, assistant or tool.");
        if (msg.contains("content")) cm.content = content_text(msg["content"], where + ".content");
        if (msg.contains("reasoning_content") && !msg["reasoning_content"].is_null())
            cm.reasoning_content = content_text(msg["reasoning_content"], where + ".reasoning_content");
        if (msg.contains("tool_calls") && !msg["tool_calls"].is_null())
            bad_field(where + ".tool_calls", "tool calls are not supported by this server yet.");
        out.push_back(std::move(cm));
    }
    return out;
}

}  // namespace

CompletionRequest parse_completion_request(const std::string& body, bool chat) {
    const json j = parse_json_object(body);
    CompletionRequest r;
    r.chat = chat;
    if (j.contains("model") && !j["model"].is_null()) r.model = string_field(j, "model");
    if (chat) {
        r.messages = messages(j);
    } else {
        if (!j.contains("prompt")) bad_field("prompt", "'prompt' is required.");
        if (!j["prompt"].is_string()) bad_field("prompt", "'prompt' must be a string (token arrays and batches are not supported).");
        r.prompt = j["prompt"].get<std::string>();
    }
    // OpenAI's sampling defaults, with llama.cpp's top_k and min_p off.
    SamplerParams& s = r.generate.sampling;
    s.temperature = 1.0f;
    s.top_p = 1.0f;
    s.top_k = 0;
    s.min_p = 0.0f;
    auto present = [&](const char* k) { return ds4::present(j, k); };
    if (present("temperature")) s.temperature = float(number_field(j, "temperature", 0.0, 2.0));
    if (present("top_p")) {
        s.top_p = float(number_field(j, "top_p", 0.0, 1.0));
        if (s.top_p <= 0.0f) bad_field("top_p", "'top_p' must be greater than 0.");
    }
    if (present("top_k")) s.top_k = int(integer_field(j, "top_k", 0, 1 << 30));
    if (present("min_p")) s.min_p = float(number_field(j, "min_p", 0.0, 1.0));
    if (present("seed")) s.seed = uint64_t(integer_field(j, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
    const char* limit_key = present("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if (present(limit_key)) r.generate.max_tokens = integer_field(j, limit_key, 0, std::numeric_limits<int32_t>::max());
    if (present("stop")) {
        const json& st = j["stop"];
        if (st.is_string()) {
            r.generate.stop = {st.get<std::string>()};
        } else if (st.is_array() && st.size() <= 16) {
            for (const json& x : st) {
                if (!x.is_string()) bad_field("stop", "'stop' must be a string or an array of up to 16 strings.");
                r.generate.stop.push_back(x.get<std::string>());
            }
        } else {
            bad_field("stop", "'stop' must be a string or an array of up to 16 strings.");
        }
    }
    if (present("n") && integer_field(j, "n", 1, 1) != 1) bad_field("n", "'n' must be 1.");
    if (present("stream")) r.stream = boolean_field(j, "stream");
    if (present("stream_options")) {
        const json& so = j["stream_options"];
        if (!so.is_object()) bad_field("stream_options", "'stream_options' must be an object.");
        if (so.contains("include_usage") && !so["include_usage"].is_null())
            r.include_usage = boolean_field(so, "include_usage");
    }
    for (const char* k : {"tools", "tool_choice", "logprobs", "top_logprobs", "functions", "response_format"})
        if (present(k) && !(std::string(k) == "logprobs" && j[k].is_boolean() && !j[k].get<bool>()))
            bad_field(k, std::string("'") + k + "' is not supported by this server yet.");
    if (present("reasoning_effort")) {
        const std::string e = string_field(j, "reasoning_effort");
        if (e == "none") r.chat_options.enable_thinking = false;
        else if (e == "max" || e == "high") r.chat_options.reasoning_effort = e;
        else if (e != "low" && e != "medium" && e != "minimal") bad_field("reasoning_effort", "'reasoning_effort' must be none, minimal, low, medium, high or max.");
    }
    return r;
}

}  // namespace ds4

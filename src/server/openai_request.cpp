#include "server/openai_request.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "sampling/sampler.h"
#include "server/api_error.h"

namespace ds4 {

namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& param, const std::string& message) { throw ApiError(400, message, param); }

double number(const json& j, const std::string& key, double lo, double hi) {
    const json& v = j.at(key);
    if (!v.is_number()) bad(key, "'" + key + "' must be a number.");
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < lo || d > hi)
        bad(key, "'" + key + "' must be between " + json(lo).dump() + " and " + json(hi).dump() + ".");
    return d;
}

int64_t integer(const json& j, const std::string& key, int64_t lo, int64_t hi) {
    const json& v = j.at(key);
    if (!v.is_number_integer()) bad(key, "'" + key + "' must be an integer.");
    const int64_t i = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())
                          ? std::numeric_limits<int64_t>::max()
                          : v.get<int64_t>();
    if (i < lo || i > hi) bad(key, "'" + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ".");
    return i;
}

bool boolean(const json& j, const std::string& key) {
    const json& v = j.at(key);
    if (!v.is_boolean()) bad(key, "'" + key + "' must be true or false.");
    return v.get<bool>();
}

std::string string(const json& j, const std::string& key) {
    const json& v = j.at(key);
    if (!v.is_string()) bad(key, "'" + key + "' must be a string.");
    return v.get<std::string>();
}

// Message content: a string, or an array of {"type": "text", "text": ...}
// parts joined (other part types, e.g. images, are refused).
std::string content_text(const json& c, const std::string& where) {
    if (c.is_null()) return "";
    if (c.is_string()) return c.get<std::string>();
    if (!c.is_array()) bad(where, "'" + where + "' must be a string or an array of text parts.");
    std::string text;
    for (const json& part : c) {
        if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
            !part["text"].is_string())
            bad(where, "'" + where + "' holds a part that is not {\"type\": \"text\", \"text\": ...}; ds4 reads text only.");
        text += part["text"].get<std::string>();
    }
    return text;
}

std::vector<ChatMessage> messages(const json& j) {
    if (!j.contains("messages")) bad("messages", "'messages' is required.");
    const json& m = j["messages"];
    if (!m.is_array() || m.empty()) bad("messages", "'messages' must be a non-empty array.");
    std::vector<ChatMessage> out;
    for (size_t i = 0; i < m.size(); ++i) {
        const std::string where = "messages[" + std::to_string(i) + "]";
        const json& msg = m[i];
        if (!msg.is_object()) bad(where, "'" + where + "' must be an object.");
        if (!msg.contains("role") || !msg["role"].is_string()) bad(where + ".role", "'" + where + ".role' must be a string.");
        ChatMessage cm;
        cm.role = msg["role"].get<std::string>();
        if (cm.role != "system" && cm.role != "user" && cm.role != "assistant" && cm.role != "tool" &&
            cm.role != "developer")
            bad(where + ".role", "'" + where + ".role' must be system, developer, user, assistant or tool.");
        if (msg.contains("content")) cm.content = content_text(msg["content"], where + ".content");
        if (msg.contains("reasoning_content") && !msg["reasoning_content"].is_null())
            cm.reasoning_content = content_text(msg["reasoning_content"], where + ".reasoning_content");
        if (msg.contains("tool_calls") && !msg["tool_calls"].is_null())
            bad(where + ".tool_calls", "tool calls are not supported by this server yet.");
        out.push_back(std::move(cm));
    }
    return out;
}

}  // namespace

CompletionRequest parse_completion_request(const std::string& body, bool chat) {
    json j;
    try {
        j = json::parse(body);
    } catch (const json::exception&) {
        // Syntax errors, and numbers out of every range (out_of_range 406).
        throw ApiError(400, "the request body is not valid JSON.");
    }
    if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object.");
    CompletionRequest r;
    r.chat = chat;
    if (j.contains("model") && !j["model"].is_null()) r.model = string(j, "model");
    if (chat) {
        r.messages = messages(j);
    } else {
        if (!j.contains("prompt")) bad("prompt", "'prompt' is required.");
        if (!j["prompt"].is_string()) bad("prompt", "'prompt' must be a string (token arrays and batches are not supported).");
        r.prompt = j["prompt"].get<std::string>();
    }
    // OpenAI's sampling defaults, with llama.cpp's top_k and min_p off.
    SamplerParams& s = r.generate.sampling;
    s.temperature = 1.0f;
    s.top_p = 1.0f;
    s.top_k = 0;
    s.min_p = 0.0f;
    auto present = [&](const char* k) { return j.contains(k) && !j[k].is_null(); };
    if (present("temperature")) s.temperature = float(number(j, "temperature", 0.0, 2.0));
    if (present("top_p")) {
        s.top_p = float(number(j, "top_p", 0.0, 1.0));
        if (s.top_p <= 0.0f) bad("top_p", "'top_p' must be greater than 0.");
    }
    if (present("top_k")) s.top_k = int(integer(j, "top_k", 0, 1 << 30));
    if (present("min_p")) s.min_p = float(number(j, "min_p", 0.0, 1.0));
    if (present("seed")) s.seed = uint64_t(integer(j, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
    const char* limit_key = present("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if (present(limit_key)) r.generate.max_tokens = integer(j, limit_key, 0, std::numeric_limits<int32_t>::max());
    if (present("stop")) {
        const json& st = j["stop"];
        if (st.is_string()) {
            r.generate.stop = {st.get<std::string>()};
        } else if (st.is_array() && st.size() <= 16) {
            for (const json& x : st) {
                if (!x.is_string()) bad("stop", "'stop' must be a string or an array of up to 16 strings.");
                r.generate.stop.push_back(x.get<std::string>());
            }
        } else {
            bad("stop", "'stop' must be a string or an array of up to 16 strings.");
        }
    }
    if (present("n") && integer(j, "n", 1, 1) != 1) bad("n", "'n' must be 1.");
    if (present("stream")) r.stream = boolean(j, "stream");
    if (present("stream_options")) {
        const json& so = j["stream_options"];
        if (!so.is_object()) bad("stream_options", "'stream_options' must be an object.");
        if (so.contains("include_usage") && !so["include_usage"].is_null())
            r.include_usage = boolean(so, "include_usage");
    }
    for (const char* k : {"tools", "tool_choice", "logprobs", "top_logprobs", "functions", "response_format"})
        if (present(k) && !(std::string(k) == "logprobs" && j[k].is_boolean() && !j[k].get<bool>()))
            bad(k, std::string("'") + k + "' is not supported by this server yet.");
    if (present("reasoning_effort")) {
        const std::string e = string(j, "reasoning_effort");
        if (e == "none") r.chat_options.enable_thinking = false;
        else if (e == "max" || e == "high") r.chat_options.reasoning_effort = e;
        else if (e != "low" && e != "medium" && e != "minimal") bad("reasoning_effort", "'reasoning_effort' must be none, minimal, low, medium, high or max.");
    }
    return r;
}

}  // namespace ds4

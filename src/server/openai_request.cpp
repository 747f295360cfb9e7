#include "server/openai_request.h"

#include <limits>

#include "chat/python_json.h"
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

// An assistant's tool_calls: [{"id", "type": "function", "function":
// {"name", "arguments"}}]. Arguments are a JSON object's text (an object
// itself is accepted too, printed as the templates print JSON); the text
// is kept as sent, since the Qwen3 template prints it verbatim.
std::vector<ChatToolCall> tool_calls(const nlohmann::ordered_json& calls, const std::string& where) {
    if (!calls.is_array()) bad_field(where, "'" + where + "' must be an array of tool calls.");
    std::vector<ChatToolCall> out;
    for (size_t k = 0; k < calls.size(); ++k) {
        const std::string w = where + "[" + std::to_string(k) + "]";
        const nlohmann::ordered_json& c = calls[k];
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
            bad_field(w, "'" + w + "' must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}.");
        const nlohmann::ordered_json& fn = c["function"];
        if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty())
            bad_field(w + ".function.name", "'" + w + ".function.name' must be a non-empty string.");
        ChatToolCall call;
        call.name = fn["name"].get<std::string>();
        if (c.contains("id") && !c["id"].is_null()) {
            if (!c["id"].is_string()) bad_field(w + ".id", "'" + w + ".id' must be a string.");
            call.id = c["id"].get<std::string>();
        }
        const std::string aw = w + ".function.arguments";
        if (!fn.contains("arguments") || fn["arguments"].is_null()) {
            call.arguments = "{}";
        } else if (fn["arguments"].is_string()) {
            call.arguments = fn["arguments"].get<std::string>();
            check_tool_arguments(call.arguments, aw);
        } else if (fn["arguments"].is_object()) {
            call.arguments = python_json_dumps(fn["arguments"]);
        } else {
            bad_field(aw, "'" + aw + "' must be a JSON object's text.");
        }
        out.push_back(std::move(call));
    }
    return out;
}

std::vector<ChatMessage> messages(const json& j, const nlohmann::ordered_json& ordered) {
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
        if (msg.contains("tool_calls") && !msg["tool_calls"].is_null()) {
            if (cm.role != "assistant")
                bad_field(where + ".tool_calls", "'" + where + ".tool_calls' is for assistant messages only.");
            cm.tool_calls = tool_calls(ordered["messages"][i]["tool_calls"], where + ".tool_calls");
        }
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
    // The same body with its keys in the order sent: tool schemas and
    // argument objects are printed into the prompt in that order.
    const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(body);
    if (chat) {
        r.messages = messages(j, ordered);
        r.tools = parse_openai_tools(ordered);
        if (r.tools.active()) r.chat_options.tools = r.tools.specs;
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
    // llama.cpp's and vLLM's extension: never sample an end-of-generation token.
    if (present("ignore_eos")) r.generate.ignore_eos = boolean_field(j, "ignore_eos");
    if (present("stream_options")) {
        const json& so = j["stream_options"];
        if (!so.is_object()) bad_field("stream_options", "'stream_options' must be an object.");
        if (so.contains("include_usage") && !so["include_usage"].is_null())
            r.include_usage = boolean_field(so, "include_usage");
    }
    if (!chat)
        for (const char* k : {"tools", "tool_choice"})
            if (present(k)) bad_field(k, std::string("'") + k + "' is for /v1/chat/completions; completions take a bare prompt.");
    for (const char* k : {"functions", "function_call", "response_format"})
        if (present(k)) bad_field(k, std::string("'") + k + "' is not supported by this server yet.");
    // Log probabilities: chat's `logprobs` (true) and `top_logprobs`
    // (0..20 alternatives), completions' `logprobs` (0..20 alternatives).
    const std::string top_max = std::to_string(kMaxTopLogprobs);
    if (chat) {
        const bool wanted = present("logprobs") && boolean_field(j, "logprobs");
        if (present("top_logprobs")) {
            const int64_t n = integer_field(j, "top_logprobs", 0, kMaxTopLogprobs);
            if (!wanted) bad_field("top_logprobs", "'top_logprobs' needs 'logprobs': true.");
            r.generate.top_logprobs = int(n);
        } else if (wanted) {
            r.generate.top_logprobs = 0;
        }
    } else {
        if (present("top_logprobs"))
            bad_field("top_logprobs", "'top_logprobs' is for /v1/chat/completions; completions take 'logprobs': 0.." + top_max + ".");
        if (present("logprobs")) {
            if (j["logprobs"].is_boolean())
                bad_field("logprobs", "'logprobs' on /v1/completions is the number of alternatives, 0.." + top_max + ".");
            r.generate.top_logprobs = int(integer_field(j, "logprobs", 0, kMaxTopLogprobs));
        }
    }
    if (present("reasoning_effort")) {
        const std::string e = string_field(j, "reasoning_effort");
        if (e == "none") r.chat_options.enable_thinking = false;
        else if (e == "max" || e == "high") r.chat_options.reasoning_effort = e;
        else if (e != "low" && e != "medium" && e != "minimal") bad_field("reasoning_effort", "'reasoning_effort' must be none, minimal, low, medium, high or max.");
    }
    return r;
}

}  // namespace ds4

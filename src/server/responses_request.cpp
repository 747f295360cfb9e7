#include "server/responses_request.h"

#include <limits>
#include <optional>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace ds4 {

namespace {

using ojson = nlohmann::ordered_json;

// The item's "type", or "message" for the short form {role, content}.
std::string responses_item_type(const json& item) {
    if (item.contains("type") && item["type"].is_string()) return item["type"].get<std::string>();
    if (!item.contains("type") && item.contains("role")) return "message";
    return "";
}

// A message's content: a string, or text parts joined (input_text,
// output_text; an assistant's refusal parts as their text).
std::string responses_content(const json& item, const std::string& where) {
    if (!item.contains("content")) bad_field(where + ".content", "'" + where + ".content' is required.");
    const json& c = item["content"];
    const std::string w = where + ".content";
    if (c.is_string()) return c.get<std::string>();
    if (!c.is_array()) bad_field(w, "'" + w + "' must be a string or an array of input_text parts.");
    std::string text;
    for (size_t k = 0; k < c.size(); ++k) {
        const std::string pw = w + "[" + std::to_string(k) + "]";
        const json& part = c[k];
        const std::string type = part.is_object() && part.contains("type") && part["type"].is_string() ? part["type"].get<std::string>() : "";
        const char* field = type == "input_text" || type == "output_text" || type == "text" ? "text"
                            : type == "refusal"                                              ? "refusal"
                                                                                             : nullptr;
        if (!field) {
            if (type.empty()) bad_field(pw, "'" + pw + "' must be a content part object with a 'type'.");
            bad_field(pw, "'" + pw + "' is an " + type + " part; ds4 reads text only.");
        }
        if (!part.contains(field) || !part[field].is_string())
            bad_field(pw + "." + field, "'" + pw + "." + field + "' must be a string.");
        text += part[field].get<std::string>();
    }
    return text;
}

// A reasoning item's text: its reasoning_text content, or else its summary.
std::string responses_reasoning(const json& item, const std::string& where) {
    std::string text;
    for (const char* key : {"content", "summary"}) {
        if (!present(item, key)) continue;
        const json& parts = item[key];
        const std::string w = where + "." + key;
        if (!parts.is_array()) bad_field(w, "'" + w + "' must be an array of text parts.");
        for (size_t k = 0; k < parts.size(); ++k) {
            const json& p = parts[k];
            if (!p.is_object() || !p.contains("text") || !p["text"].is_string())
                bad_field(w + "[" + std::to_string(k) + "]", "'" + w + "[" + std::to_string(k) + "]' must be {\"type\", \"text\"}.");
            if (!text.empty()) text += "\n\n";
            text += p["text"].get<std::string>();
        }
        if (!text.empty()) break;
    }
    return text;
}

std::string required_string(const json& item, const char* key, const std::string& where) {
    const std::string w = where + "." + key;
    if (!item.contains(key) || !item[key].is_string()) bad_field(w, "'" + w + "' must be a string.");
    return item[key].get<std::string>();
}

// The input items, in order, as the renderer's messages (see the header).
void responses_input(const json& input, std::vector<ChatMessage>& out) {
    if (input.is_string()) {
        out.push_back(ChatMessage{"user", input.get<std::string>(), std::nullopt});
        return;
    }
    if (!input.is_array() || input.empty()) bad_field("input", "'input' must be a string or a non-empty array of items.");
    std::optional<std::string> reasoning;  // waits for the assistant turn it belongs to
    // The reasoning of a turn that has nothing else (its reply ended while
    // thinking) is an assistant turn of its own.
    auto flush_reasoning = [&] {
        if (reasoning) out.push_back(ChatMessage{"assistant", "", std::move(reasoning)});
        reasoning.reset();
    };
    for (size_t i = 0; i < input.size(); ++i) {
        const std::string where = "input[" + std::to_string(i) + "]";
        const json& item = input[i];
        if (!item.is_object()) bad_field(where, "'" + where + "' must be an object.");
        const std::string type = responses_item_type(item);
        if (type == "message") {
            if (!item.contains("role") || !item["role"].is_string())
                bad_field(where + ".role", "'" + where + ".role' must be a string.");
            const std::string role = item["role"].get<std::string>();
            if (role != "user" && role != "system" && role != "developer" && role != "assistant")
                bad_field(where + ".role", "'" + where + ".role' must be user, system, developer or assistant.");
            ChatMessage m{role, responses_content(item, where), std::nullopt};
            if (role == "assistant") {
                m.reasoning_content = std::move(reasoning);
                reasoning.reset();
            } else {
                flush_reasoning();
            }
            out.push_back(std::move(m));
        } else if (type == "reasoning") {
            const std::string text = responses_reasoning(item, where);
            reasoning = reasoning ? *reasoning + "\n\n" + text : text;
        } else if (type == "function_call") {
            ChatToolCall call;
            call.id = required_string(item, "call_id", where);
            call.name = required_string(item, "name", where);
            if (call.name.empty()) bad_field(where + ".name", "'" + where + ".name' must be a non-empty string.");
            call.arguments = required_string(item, "arguments", where);
            check_tool_arguments(call.arguments, where + ".arguments");
            // A call joins the assistant turn it follows (its text, or the
            // calls before it); anything else between starts a new turn.
            if (reasoning || out.empty() || out.back().role != "assistant")
                out.push_back(ChatMessage{"assistant", "", std::move(reasoning)});
            reasoning.reset();
            out.back().tool_calls.push_back(std::move(call));
        } else if (type == "function_call_output") {
            flush_reasoning();
            required_string(item, "call_id", where);
            if (!item.contains("output")) bad_field(where + ".output", "'" + where + ".output' is required.");
            std::string output;
            if (item["output"].is_string()) {
                output = item["output"].get<std::string>();
            } else {
                json as_message = {{"content", item["output"]}};
                output = responses_content(as_message, where + ".output");
            }
            out.push_back(ChatMessage{"tool", std::move(output), std::nullopt});
        } else if (type == "item_reference") {
            bad_field(where, "'" + where + "' is an item_reference; ds4 stores no responses, so send the items themselves.");
        } else if (type.empty()) {
            bad_field(where, "'" + where + "' must be an item with a 'type' (or a {role, content} message).");
        } else {
            bad_field(where, "'" + where + "' is a " + type +
                                 " item; ds4 reads message, reasoning, function_call and function_call_output items.");
        }
    }
    flush_reasoning();
}

void responses_sampling(const json& j, ResponsesRequest& r) {
    // OpenAI's defaults, with llama.cpp's top_k and min_p off.
    SamplerParams& s = r.generate.sampling;
    s.temperature = 1.0f;
    s.top_p = 1.0f;
    s.top_k = 0;
    s.min_p = 0.0f;
    if (present(j, "temperature")) s.temperature = float(number_field(j, "temperature", 0.0, 2.0));
    if (present(j, "top_p")) {
        s.top_p = float(number_field(j, "top_p", 0.0, 1.0));
        if (s.top_p <= 0.0f) bad_field("top_p", "'top_p' must be greater than 0.");
    }
    if (present(j, "top_k")) s.top_k = int(integer_field(j, "top_k", 0, 1 << 30));
    if (present(j, "min_p")) s.min_p = float(number_field(j, "min_p", 0.0, 1.0));
    if (present(j, "seed"))
        s.seed = uint64_t(integer_field(j, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
    if (present(j, "max_output_tokens"))
        r.generate.max_tokens = integer_field(j, "max_output_tokens", 1, std::numeric_limits<int32_t>::max());
    r.echo["temperature"] = s.temperature;
    r.echo["top_p"] = s.top_p;
    r.echo["max_output_tokens"] = r.generate.max_tokens >= 0 ? json(r.generate.max_tokens) : json(nullptr);
}

// `reasoning`: {"effort", "summary"}; the effort as chat's reasoning_effort.
void responses_reasoning_options(const json& j, ResponsesRequest& r) {
    r.echo["reasoning"] = {{"effort", nullptr}, {"summary", nullptr}};
    if (!present(j, "reasoning")) return;
    const json& re = j["reasoning"];
    if (!re.is_object()) bad_field("reasoning", "'reasoning' must be an object.");
    if (present(re, "effort")) {
        const std::string e = string_field(re, "effort", "reasoning.effort");
        if (e == "none") r.chat_options.enable_thinking = false;
        else if (e == "max" || e == "high") r.chat_options.reasoning_effort = e;
        else if (e != "low" && e != "medium" && e != "minimal")
            bad_field("reasoning.effort", "'reasoning.effort' must be none, minimal, low, medium, high or max.");
        r.echo["reasoning"]["effort"] = e;
    }
    if (present(re, "summary")) r.echo["reasoning"]["summary"] = string_field(re, "summary", "reasoning.summary");
}

// Log probabilities, as OpenAI's Responses API asks for them: `include`
// naming "message.output_text.logprobs" turns them on (the other values
// name outputs ds4 has no part of, so they are accepted and change
// nothing), `top_logprobs` (0..20) is how many alternatives each token
// reports. `top_logprobs` alone reports nothing, as on OpenAI's API, and
// is echoed.
void responses_logprobs(const json& j, ResponsesRequest& r) {
    bool wanted = false;
    if (present(j, "include")) {
        const json& inc = j["include"];
        if (!inc.is_array()) bad_field("include", "'include' must be an array of strings.");
        for (const json& x : inc) {
            if (!x.is_string()) bad_field("include", "'include' must be an array of strings.");
            if (x == "message.output_text.logprobs") wanted = true;
        }
    }
    int top = 0;
    if (present(j, "top_logprobs")) top = int(integer_field(j, "top_logprobs", 0, kMaxTopLogprobs));
    if (wanted) r.generate.top_logprobs = top;
    r.echo["top_logprobs"] = top;
}

// Fields of the API that need state or machinery ds4 does not have.
void responses_refusals(const json& j) {
    if (present(j, "previous_response_id"))
        bad_field("previous_response_id", "'previous_response_id' needs stored responses, which ds4 does not keep; send the whole conversation in 'input'.");
    if (present(j, "conversation"))
        bad_field("conversation", "'conversation' needs stored conversations, which ds4 does not keep; send the whole conversation in 'input'.");
    if (present(j, "prompt")) bad_field("prompt", "'prompt' (a stored prompt template) is not supported; send 'instructions' and 'input'.");
    if (present(j, "background") && boolean_field(j, "background"))
        bad_field("background", "'background' runs are not supported by this server.");
    if (present(j, "truncation")) {
        const std::string t = string_field(j, "truncation");
        if (t != "disabled") bad_field("truncation", "'truncation' must be disabled: ds4 never drops input items (a prompt the context cannot hold is a 400).");
    }
    if (present(j, "text")) {
        const json& t = j["text"];
        if (!t.is_object()) bad_field("text", "'text' must be an object.");
        if (present(t, "format")) {
            const json& f = t["format"];
            if (!f.is_object() || !f.contains("type") || f["type"] != "text")
                bad_field("text.format", "'text.format' must be {\"type\": \"text\"}; structured output is not supported by this server yet.");
        }
    }
    for (const char* k : {"store", "parallel_tool_calls"})
        if (present(j, k)) boolean_field(j, k);
    if (present(j, "metadata") && !j["metadata"].is_object()) bad_field("metadata", "'metadata' must be an object.");
    if (present(j, "user")) string_field(j, "user");
}

}  // namespace

ResponsesRequest parse_responses_request(const std::string& body) {
    const json j = parse_json_object(body);
    ResponsesRequest r;
    if (present(j, "model")) r.model = string_field(j, "model");
    responses_refusals(j);
    r.echo["instructions"] = nullptr;
    if (present(j, "instructions")) {
        std::string s = string_field(j, "instructions");
        r.echo["instructions"] = s;
        if (!s.empty()) r.messages.push_back(ChatMessage{"system", std::move(s), std::nullopt});
    }
    if (!present(j, "input")) bad_field("input", "'input' is required.");
    responses_input(j["input"], r.messages);
    // The body with its keys in the order sent: tool schemas are printed
    // into the prompt in that order.
    const ojson ordered = ojson::parse(body);
    r.tools = parse_responses_tools(ordered);
    if (r.tools.active()) r.chat_options.tools = r.tools.specs;
    r.echo["tools"] = present(j, "tools") ? json::parse(ordered["tools"].dump()) : json::array();
    r.echo["tool_choice"] = present(j, "tool_choice") ? j["tool_choice"] : json("auto");
    r.echo["parallel_tool_calls"] = present(j, "parallel_tool_calls") ? j["parallel_tool_calls"] : json(true);
    r.echo["metadata"] = present(j, "metadata") ? j["metadata"] : json::object();
    r.echo["store"] = false;  // nothing is kept, whatever was asked
    r.echo["user"] = present(j, "user") ? j["user"] : json(nullptr);
    r.echo["text"] = {{"format", {{"type", "text"}}}};
    r.echo["truncation"] = "disabled";
    r.echo["previous_response_id"] = nullptr;
    responses_sampling(j, r);
    responses_reasoning_options(j, r);
    responses_logprobs(j, r);
    if (present(j, "stream")) r.stream = boolean_field(j, "stream");
    // llama.cpp's and vLLM's extension: never sample an end-of-generation token.
    if (present(j, "ignore_eos")) r.generate.ignore_eos = boolean_field(j, "ignore_eos");
    return r;
}

}  // namespace ds4

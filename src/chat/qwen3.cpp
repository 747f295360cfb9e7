// Qwen3 chat templates, transcribed statement by statement from the Jinja
// source in Qwen/Qwen3-* tokenizer_config.json (the April 2025 one is
// llama.cpp's models/templates/Qwen-Qwen3-0.6B.jinja; the 2507 Instruct and
// Thinking ones are in tests/data/templates). The 2507 revision spells the
// body differently (it copies string content into a variable first) but
// renders string-only conversations the same; only the opening of the
// assistant turn differs. The oracle test renders random conversations with
// the real templates and compares bytes, so keep the structure close to the
// template rather than "simplifying" it.
#include "chat/chat.h"

#include <nlohmann/json.hpp>

#include "chat/python_json.h"
#include "common/error.h"

namespace ds4 {
namespace {

// Python's str.lstrip('\n') / rstrip('\n') / strip('\n'): only newlines.
std::string_view lstrip_newlines(std::string_view s) {
    while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
    return s;
}
std::string_view rstrip_newlines(std::string_view s) {
    while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
    return s;
}
std::string_view strip_newlines(std::string_view s) { return rstrip_newlines(lstrip_newlines(s)); }

// s.split(sep)[0] and s.split(sep)[-1] in Python.
std::string_view first_part(std::string_view s, std::string_view sep) {
    size_t at = s.find(sep);
    return at == std::string_view::npos ? s : s.substr(0, at);
}
std::string_view last_part(std::string_view s, std::string_view sep) {
    size_t at = s.rfind(sep);
    return at == std::string_view::npos ? s : s.substr(at + sep.size());
}

bool is_tool_response(std::string_view content) {
    return content.starts_with("<tool_response>") && content.ends_with("</tool_response>");
}

// The template's "last query": the latest user message that is not a wrapped
// tool response. Reasoning is only kept for assistant turns after it.
size_t last_query_index(const std::vector<ChatMessage>& messages) {
    for (size_t i = messages.size(); i-- > 0;) {
        if (messages[i].role == "user" && !is_tool_response(messages[i].content)) return i;
    }
    return messages.size() - 1;
}

void check_qwen3_roles(const std::vector<ChatMessage>& messages) {
    for (size_t i = 0; i < messages.size(); ++i) {
        const std::string& role = messages[i].role;
        if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
            throw Error("chat message " + std::to_string(i) + " has role \"" + role +
                        "\", but the Qwen3 template only knows system, user, assistant and tool.");
        }
    }
}

// The system turn when tools are given: the system message's text, then
// every spec as `tool | tojson` between <tools> tags.
void render_tools_system(const std::vector<ChatMessage>& messages, const nlohmann::ordered_json& tools,
                         std::string& out) {
    out += "<|im_start|>system\n";
    if (messages[0].role == "system") {
        out += messages[0].content;
        out += "\n\n";
    }
    out += "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
           "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
    for (const auto& tool : tools) {
        out += "\n";
        out += python_json_dumps(tool);
    }
    out += "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
           "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
           "<args-json-object>}\n</tool_call><|im_end|>\n";
}

// The tools as the template sees them: a JSON array, or null (no tools:
// absent, null, or an empty list, all falsy in Jinja).
nlohmann::ordered_json parse_tools(const std::string& text) {
    if (text.empty()) return nullptr;
    nlohmann::ordered_json tools = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (tools.is_discarded()) throw Error("the tool list is not valid JSON.");
    if (!tools.is_array() && !tools.is_null()) throw Error("the tool list must be a JSON array of tool specs.");
    if (tools.is_array() && tools.empty()) return nullptr;
    return tools;
}

// An assistant's calls, each "<tool_call>\n{...}\n</tool_call>", one per
// line; `content` is the (split) content the template tests for emptiness.
void render_tool_calls(const ChatMessage& message, std::string_view content, std::string& out) {
    if (!message.sampled_tool_calls.empty()) {
        out += message.sampled_tool_calls;
        return;
    }
    for (size_t i = 0; i < message.tool_calls.size(); ++i) {
        const ChatToolCall& call = message.tool_calls[i];
        if (i > 0 || !content.empty()) out += "\n";
        out += "<tool_call>\n{\"name\": \"";
        out += call.name;
        out += "\", \"arguments\": ";
        out += call.arguments;  // OpenAI's arguments are a string: printed as is
        out += "}\n</tool_call>";
    }
}

void render_assistant(const ChatMessage& message, bool after_last_query, bool is_last,
                      std::string& out) {
    std::string_view content = message.content;
    std::string_view reasoning;
    if (message.reasoning_content) {
        reasoning = *message.reasoning_content;
    } else if (content.find("</think>") != std::string_view::npos) {
        // Reasoning left inline in the content: split it out the way the
        // template does (its order of strips matters for odd inputs).
        std::string_view whole = content;
        content = lstrip_newlines(last_part(whole, "</think>"));
        reasoning = lstrip_newlines(last_part(rstrip_newlines(first_part(whole, "</think>")), "<think>"));
    }
    out += "<|im_start|>assistant\n";
    // Earlier turns lose their reasoning; the turns of the current query
    // (tool-calling steps) and the final message keep it.
    if (after_last_query && (is_last || !reasoning.empty())) {
        out += "<think>\n";
        out += strip_newlines(reasoning);
        out += "\n</think>\n\n";
        out += lstrip_newlines(content);
    } else {
        out += content;
    }
    render_tool_calls(message, content, out);
    out += "<|im_end|>\n";
}

}  // namespace

std::string render_qwen3(const std::vector<ChatMessage>& messages, const ChatOptions& options,
                         Qwen3Variant variant) {
    if (messages.empty()) throw Error("cannot render an empty chat: the Qwen3 template needs at least one message.");
    check_qwen3_roles(messages);

    const nlohmann::ordered_json tools = parse_tools(options.tools);
    std::string out;
    if (!tools.is_null()) {
        render_tools_system(messages, tools, out);
    } else if (messages[0].role == "system") {
        out += "<|im_start|>system\n";
        out += messages[0].content;
        out += "<|im_end|>\n";
    }
    const size_t last_query = last_query_index(messages);
    const size_t n = messages.size();
    for (size_t i = 0; i < n; ++i) {
        const ChatMessage& message = messages[i];
        if (message.role == "user" || (message.role == "system" && i != 0)) {
            out += "<|im_start|>";
            out += message.role;
            out += "\n";
            out += message.content;
            out += "<|im_end|>\n";
        } else if (message.role == "assistant") {
            render_assistant(message, i > last_query, i + 1 == n, out);
        } else if (message.role == "tool") {
            // Consecutive tool results share one user turn.
            if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
            out += "\n<tool_response>\n";
            out += message.content;
            out += "\n</tool_response>";
            if (i + 1 == n || messages[i + 1].role != "tool") out += "<|im_end|>\n";
        }
    }
    if (options.add_generation_prompt) {
        out += "<|im_start|>assistant\n";
        switch (variant) {
            case Qwen3Variant::hybrid:
                if (!options.enable_thinking) out += "<think>\n\n</think>\n\n";
                break;
            case Qwen3Variant::instruct_2507:
                break;  // the template has no thinking switch
            case Qwen3Variant::thinking_2507:
                out += "<think>\n";  // thinking is not optional for this model
                break;
        }
    }
    return out;
}

}  // namespace ds4

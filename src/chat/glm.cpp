// GLM chat templates, transcribed statement by statement from llama.cpp's
// models/templates/GLM-4.6.jinja (GLM-4.5 and 4.6: a newline after each
// marker, "/nothink" appended to user turns in no-think mode) and
// GLM-4.7-Flash.jinja (GLM-4.7 and the GLM-5 generation: markers written
// tight, the generation prompt opens "<think>" or closes it). Both open
// with "[gMASK]<sop>", offer tools in a system turn, write calls as
//   <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>
// (with newlines between the parts in 4.6) and tool results after
// <|observation|>. tests/oracle/chat_glm_test.cpp renders random
// conversations with the real templates under jinja2 and
// engine_chat_prompt_llama_test.cpp with llama.cpp's Jinja engine and
// compares bytes, so keep the structure close to the templates.
//
// str.strip() in the templates is Python's: it strips Unicode whitespace
// (U+00A0, U+3000, ...), not only ASCII. ds4 follows Python, the language
// the templates were written and trained in; llama.cpp's Jinja engine
// strips only ASCII whitespace, so the two differ on content that begins or
// ends with other whitespace (the llama.cpp comparison leaves that out).
#include <nlohmann/json.hpp>

#include "chat/chat.h"
#include "chat/python_json.h"
#include "common/error.h"

namespace ds4 {
namespace {

using nlohmann::ordered_json;

// The code point of the UTF-8 sequence starting at s[i] and its length;
// {0xFFFD, 1} for a malformed byte (never whitespace, so strip stops there).
std::pair<char32_t, size_t> glm_decode_at(std::string_view s, size_t i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) return {b, 1};
    const size_t n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
    if (n == 0 || i + n > s.size()) return {0xFFFD, 1};
    char32_t cp = b & (0xFF >> (n + 1));
    for (size_t k = 1; k < n; ++k) {
        const auto c = static_cast<unsigned char>(s[i + k]);
        if ((c & 0xC0) != 0x80) return {0xFFFD, 1};
        cp = (cp << 6) | (c & 0x3F);
    }
    return {cp, n};
}

// Python's str.isspace() for one code point: what str.strip() removes.
bool glm_py_space(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python's str.strip() with no argument.
std::string_view glm_py_strip(std::string_view s) {
    size_t begin = 0;
    while (begin < s.size()) {
        const auto [cp, len] = glm_decode_at(s, begin);
        if (!glm_py_space(cp)) break;
        begin += len;
    }
    size_t end = s.size();
    while (end > begin) {
        size_t start = end - 1;  // back to the lead byte of the last character
        while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && end - start < 4) --start;
        const auto [cp, len] = glm_decode_at(s, start);
        if (start + len != end || !glm_py_space(cp)) break;
        end = start;
    }
    return s.substr(begin, end - begin);
}

std::string_view glm_lstrip_newlines(std::string_view s) {
    while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
    return s;
}
std::string_view glm_rstrip_newlines(std::string_view s) {
    while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
    return s;
}
// s.split(sep)[0] and s.split(sep)[-1] in Python.
std::string_view glm_first_part(std::string_view s, std::string_view sep) {
    const size_t at = s.find(sep);
    return at == std::string_view::npos ? s : s.substr(0, at);
}
std::string_view glm_last_part(std::string_view s, std::string_view sep) {
    const size_t at = s.rfind(sep);
    return at == std::string_view::npos ? s : s.substr(at + sep.size());
}

void check_glm_roles(const std::vector<ChatMessage>& messages) {
    // The templates skip other roles silently; llama.cpp would turn a
    // "developer" message into a system one first. Neither is what the
    // caller meant, so refuse instead of guessing.
    for (size_t i = 0; i < messages.size(); ++i) {
        const std::string& role = messages[i].role;
        if (role != "system" && role != "user" && role != "assistant" && role != "tool")
            throw Error("chat message " + std::to_string(i) + " has role \"" + role +
                        "\", but the GLM template only knows system, user, assistant and tool.");
    }
}

// The tools as the template sees them: a JSON array, or null (absent, null
// or empty: all falsy in Jinja).
ordered_json glm_parse_tools(const std::string& text) {
    if (text.empty()) return nullptr;
    ordered_json tools = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (tools.is_discarded()) throw Error("the tool list is not valid JSON.");
    if (!tools.is_array() && !tools.is_null()) throw Error("the tool list must be a JSON array of tool specs.");
    if (tools.is_array() && tools.empty()) return nullptr;
    return tools;
}

void render_glm_tools(const ordered_json& tools, GlmVariant variant, std::string& out) {
    out += "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
           "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n";
    for (const auto& tool : tools) {
        out += python_json_dumps(tool);
        out += "\n";
    }
    out += "</tools>\n\nFor each function call, output the function name and arguments within the following XML "
           "format:\n";
    if (variant == GlmVariant::glm46)
        out += "<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}</arg_value>\n"
               "<arg_key>{arg-key-2}</arg_key>\n<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call>";
    else
        out += "<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value>"
               "<arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>";
}

// A call's arguments as the template iterates them (`_args.items()`): a
// JSON object. GLM-4.6 reads `tc.arguments or {}`, so nothing at all is an
// empty object there.
ordered_json glm_call_arguments(const ChatToolCall& call, GlmVariant variant) {
    const ordered_json args = ordered_json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
    if (variant == GlmVariant::glm46 && (call.arguments.empty() || args.is_null())) return ordered_json::object();
    if (args.is_discarded() || !args.is_object())
        throw Error("the arguments of tool call \"" + call.name + "\" are not a JSON object, which the GLM template needs.");
    return args;
}

// Each call: its name, then every argument, strings as they are and other
// values as `tojson`.
void render_glm_calls(const ChatMessage& message, GlmVariant variant, std::string& out) {
    if (!message.sampled_tool_calls.empty()) {
        out += message.sampled_tool_calls;
        return;
    }
    const char* sep = variant == GlmVariant::glm46 ? "\n" : "";
    for (const ChatToolCall& call : message.tool_calls) {
        out += variant == GlmVariant::glm46 ? "\n<tool_call>" : "<tool_call>";
        out += call.name;
        out += sep;
        const ordered_json args = glm_call_arguments(call, variant);
        for (const auto& [key, value] : args.items()) {
            out += "<arg_key>";
            out += key;
            out += "</arg_key>";
            out += sep;
            out += "<arg_value>";
            out += value.is_string() ? value.get<std::string>() : python_json_dumps(value);
            out += "</arg_value>";
            out += sep;
        }
        out += "</tool_call>";
    }
}

void render_glm_assistant(const ChatMessage& message, bool keep_reasoning, GlmVariant variant, std::string& out) {
    std::string_view content = message.content;
    std::string_view reasoning;
    if (message.reasoning_content) {
        reasoning = *message.reasoning_content;
    } else if (content.find("</think>") != std::string_view::npos) {
        // Reasoning left inline: split it out as the template does.
        const std::string_view whole = content;
        reasoning = glm_lstrip_newlines(glm_last_part(glm_rstrip_newlines(glm_first_part(whole, "</think>")), "<think>"));
        content = glm_lstrip_newlines(glm_last_part(whole, "</think>"));
    }
    out += "<|assistant|>";
    const bool glm46 = variant == GlmVariant::glm46;
    if (keep_reasoning && !reasoning.empty()) {
        out += glm46 ? "\n<think>" : "<think>";
        out += glm_py_strip(reasoning);
        out += "</think>";
    } else {
        out += glm46 ? "\n<think></think>" : "</think>";
    }
    if (const std::string_view visible = glm_py_strip(content); !visible.empty()) {
        if (glm46) out += "\n";
        out += visible;
    }
    render_glm_calls(message, variant, out);
}

}  // namespace

std::string render_glm(const std::vector<ChatMessage>& messages, const ChatOptions& options, GlmVariant variant) {
    check_glm_roles(messages);
    const bool glm46 = variant == GlmVariant::glm46;
    std::string out = "[gMASK]<sop>";
    if (const ordered_json tools = glm_parse_tools(options.tools); !tools.is_null()) render_glm_tools(tools, variant, out);

    // Reasoning is kept for the assistant turns after the last user message
    // (the current tool-calling steps); GLM-4.7's clear_thinking = false
    // (ChatOptions::drop_thinking off) keeps it everywhere.
    long last_user = -1;
    for (size_t i = 0; i < messages.size(); ++i)
        if (messages[i].role == "user") last_user = static_cast<long>(i);
    const bool keep_all = variant == GlmVariant::glm47 && !options.drop_thinking;

    for (size_t i = 0; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (m.role == "user") {
            out += glm46 ? "<|user|>\n" : "<|user|>";
            out += m.content;
            if (glm46 && !options.enable_thinking && !std::string_view(m.content).ends_with("/nothink"))
                out += "/nothink";
        } else if (m.role == "assistant") {
            render_glm_assistant(m, keep_all || static_cast<long>(i) > last_user, variant, out);
        } else if (m.role == "tool") {
            // Consecutive results share one observation turn.
            if (i == 0 || messages[i - 1].role != "tool") out += "<|observation|>";
            out += glm46 ? "\n<tool_response>\n" : "<tool_response>";
            out += m.content;
            out += glm46 ? "\n</tool_response>" : "</tool_response>";
        } else {  // system
            out += glm46 ? "<|system|>\n" : "<|system|>";
            out += m.content;
        }
    }
    if (options.add_generation_prompt) {
        out += "<|assistant|>";
        if (glm46) {
            if (!options.enable_thinking) out += "\n<think></think>";
        } else {
            out += options.enable_thinking ? "<think>" : "</think>";
        }
    }
    return out;
}

}  // namespace ds4

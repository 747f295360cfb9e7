// DeepSeek V4 chat templates, transcribed from llama.cpp's
// models/templates/deepseek-ai-DeepSeek-V4.jinja and
// deepseek-ai-DeepSeek-V4-Flash-0731.jinja (they differ only in the
// reasoning-effort preambles). tests/oracle/chat_deepseek4_test.cpp renders
// random conversations with the real templates and compares bytes, so keep
// the structure close to the template rather than "simplifying" it.
#include <string_view>

#include "chat/chat.h"
#include "chat/dsml.h"
#include "chat/python_json.h"
#include "common/error.h"

namespace ds4 {
namespace {

using nlohmann::ordered_json;

enum class Variant { v4, flash_0731 };

constexpr std::string_view kUser = "<\xEF\xBD\x9C" "User\xEF\xBD\x9C>";            // <｜User｜>
constexpr std::string_view kAssistant = "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>";  // <｜Assistant｜>
constexpr std::string_view kThinkStart = "<think>";
constexpr std::string_view kThinkEnd = "</think>";

constexpr std::string_view kEffortAbsoluteMaximum =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root "
    "cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial "
    "scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

constexpr std::string_view kEffortBeyondMaximum =
    "Reasoning Effort: Beyond maximum \xE2\x80\x94 exhaustive, relentless, and uncompromising.\n"
    "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: exhaustively "
    "decompose the problem into its most fundamental components, trace every causal chain to its root, and "
    "resolve the underlying cause rather than any surface symptom.\n"
    "Do not stop reasoning until you have independently verified the solution from multiple angles and are "
    "certain that no assumption remains unchecked and no error remains undiscovered.\n\n";

constexpr std::string_view kResponseFormatHeader =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

constexpr std::string_view kToolsFooter =
    "\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

std::string tools_header() {
    const std::string t = std::string(kDsmlToken);
    return "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can invoke "
           "tools by writing a \"<" + t + "tool_calls>\" block like the following:\n\n"
           "<" + t + "tool_calls>\n"
           "<" + t + "invoke name=\"$TOOL_NAME\">\n"
           "<" + t + "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" + t +
           "parameter>\n...\n"
           "</" + t + "invoke>\n"
           "<" + t + "invoke name=\"$TOOL_NAME2\">\n...\n"
           "</" + t + "invoke>\n"
           "</" + t + "tool_calls>\n\n"
           "String parameters should be specified as is and set `string=\"true\"`. For all other types "
           "(numbers, booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
           "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside "
           "<think>...</think> BEFORE any tool calls or final response.\n\n"
           "Otherwise, output directly after </think> with tool calls or final response.\n\n"
           "### Available Tool Schemas\n\n";
}

ordered_json parse_json(const std::string& text, const std::string& what) {
    try {
        return ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw Error(what + " is not valid JSON: " + e.what());
    }
}

std::string dumps(const ordered_json& value, const std::string& what) {
    try {
        return python_json_dumps(value);
    } catch (const nlohmann::json::exception& e) {
        throw Error(what + " cannot be written as JSON: " + e.what());
    }
}

bool is_user_like(const std::string& role) { return role == "user" || role == "developer"; }

void check_deepseek4_roles(const std::vector<ChatMessage>& messages) {
    for (size_t i = 0; i < messages.size(); ++i) {
        const std::string& role = messages[i].role;
        // The template silently drops unknown roles; a typo losing a whole
        // message is worse than a clear error.
        if (role != "system" && !is_user_like(role) && role != "assistant" && role != "tool") {
            throw Error("chat message " + std::to_string(i) + " has role \"" + role +
                        "\", but the DeepSeek V4 template only knows system, user, developer, assistant and tool.");
        }
    }
}

// The system prompt: every system message (wherever it stands), then the
// tool schemas, then the response format.
std::string system_prompt(const std::vector<ChatMessage>& messages, const ChatOptions& options, bool& has_tools) {
    std::string prompt;
    bool first = true;
    for (const ChatMessage& m : messages) {
        if (m.role != "system") continue;
        if (!first) prompt += "\n\n";
        prompt += m.content;
        first = false;
    }
    has_tools = false;
    if (!options.tools.empty()) {
        const ordered_json tools = parse_json(options.tools, "the tool list");
        if (!tools.is_array() && !tools.is_null()) throw Error("the tool list must be a JSON array of tool specs.");
        if (!tools.empty() && !tools.is_null()) {  // an empty list counts as no tools, as in the template
            has_tools = true;
            std::string schemas;
            for (size_t i = 0; i < tools.size(); ++i) {
                const ordered_json& tool = tools[i];
                if (!tool.is_object()) throw Error("tool " + std::to_string(i) + " is not a JSON object.");
                auto type = tool.find("type");
                if (type == tool.end() || *type != "function") continue;  // skipped by the template
                auto function = tool.find("function");
                if (function == tool.end()) {
                    throw Error("tool " + std::to_string(i) + " has type \"function\" but no \"function\" object.");
                }
                schemas += dumps(*function, "tool " + std::to_string(i));
                schemas += '\n';
            }
            if (!prompt.empty()) prompt += "\n\n";
            prompt += tools_header() + schemas + std::string(kToolsFooter);
        }
    }
    if (options.response_format) {
        const ordered_json format = parse_json(*options.response_format, "the response format");
        if (!prompt.empty()) prompt += "\n\n";
        prompt += std::string(kResponseFormatHeader) + dumps(format, "the response format");
    }
    return prompt;
}

void render_tool_calls(const std::vector<ChatToolCall>& calls, std::string& out) {
    const std::string t = std::string(kDsmlToken);
    out += "\n\n<" + t + "tool_calls>\n";
    for (size_t i = 0; i < calls.size(); ++i) {
        const ChatToolCall& call = calls[i];
        const std::string what = "the arguments of tool call " + std::to_string(i) + " (" + call.name + ")";
        const ordered_json args = parse_json(call.arguments, what);
        if (!args.is_object()) throw Error(what + " must be a JSON object.");
        out += "<" + t + "invoke name=\"" + call.name + "\">\n";
        for (const auto& [key, value] : args.items()) {
            out += "<" + t + "parameter name=\"" + key + "\" string=\"";
            if (value.is_string()) {
                out += "true\">" + value.get<std::string>();
            } else {
                out += "false\">" + dumps(value, what);
            }
            out += "</" + t + "parameter>\n";
        }
        if (args.empty()) out += '\n';
        out += "</" + t + "invoke>\n";
    }
    out += "</" + t + "tool_calls>";
}

std::string render(const std::vector<ChatMessage>& messages, const ChatOptions& options, Variant variant) {
    check_deepseek4_roles(messages);
    const bool thinking = options.enable_thinking;

    bool has_tools = false;
    const std::string prompt = system_prompt(messages, options, has_tools);

    std::string out = options.bos_token;
    if (!messages.empty() && thinking) {
        if (variant == Variant::flash_0731 && options.reasoning_effort == "high") {
            out += kEffortAbsoluteMaximum;
        } else if (options.reasoning_effort == "max") {
            out += variant == Variant::flash_0731 ? kEffortBeyondMaximum : kEffortAbsoluteMaximum;
        }
    }
    out += prompt;

    // Tool results count as user turns: reasoning after the last of them is
    // the current step's and is kept.
    long last_user = -1;
    bool has_tool_results = false;
    for (size_t i = 0; i < messages.size(); ++i) {
        if (is_user_like(messages[i].role) || messages[i].role == "tool") last_user = long(i);
        if (messages[i].role == "tool") has_tool_results = true;
    }

    bool in_user = false;
    for (size_t i = 0; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (is_user_like(m.role) || m.role == "tool") {
            // Consecutive user-side messages share one user turn.
            out += in_user ? std::string_view("\n\n") : kUser;
            in_user = true;
            if (m.role == "tool") {
                out += "<tool_result>" + m.content + "</tool_result>";
            } else {
                out += m.content;
            }
        } else if (m.role == "assistant") {
            in_user = false;
            out += kAssistant;
            const bool keep_reasoning =
                thinking && (!options.drop_thinking || has_tools || long(i) > last_user || has_tool_results);
            if (keep_reasoning) {
                out += kThinkStart;
                if (m.reasoning_content) out += *m.reasoning_content;
            }
            out += kThinkEnd;
            out += m.content;
            if (!m.sampled_tool_calls.empty()) {
                out += m.sampled_tool_calls;  // the exact text the model wrote for these calls
            } else if (!m.tool_calls.empty()) {
                render_tool_calls(m.tool_calls, out);
            }
            out += kEndOfSentence;
        }
    }
    if (options.add_generation_prompt) {
        out += kAssistant;
        out += thinking ? kThinkStart : kThinkEnd;
    }
    return out;
}

}  // namespace

std::string render_deepseek4(const std::vector<ChatMessage>& messages, const ChatOptions& options) {
    return render(messages, options, Variant::v4);
}

std::string render_deepseek4_flash_0731(const std::vector<ChatMessage>& messages, const ChatOptions& options) {
    return render(messages, options, Variant::flash_0731);
}

}  // namespace ds4

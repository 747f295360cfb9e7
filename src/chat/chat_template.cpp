// Choosing a renderer: by name, or from the Jinja source a GGUF carries.
#include <array>
#include <span>

#include "chat/chat.h"
#include "common/error.h"

namespace ds4 {

const std::vector<std::string>& chat_template_names() {
    static const std::vector<std::string> names = {"qwen3", "qwen3-instruct-2507", "qwen3-thinking-2507",
                                                   "deepseek4", "deepseek4-flash-0731"};
    return names;
}

std::string chat_template_list() {
    std::string list;
    for (const std::string& name : chat_template_names()) list += (list.empty() ? "" : ", ") + name;
    return list;
}

std::string render_raw(const std::vector<ChatMessage>& messages) {
    std::string text;
    for (const ChatMessage& m : messages) text += m.content;
    return text;
}

std::string render_chat(std::string_view template_name, const std::vector<ChatMessage>& messages,
                        const ChatOptions& options) {
    if (template_name == "qwen3") return render_qwen3(messages, options, Qwen3Variant::hybrid);
    if (template_name == "qwen3-instruct-2507") return render_qwen3(messages, options, Qwen3Variant::instruct_2507);
    if (template_name == "qwen3-thinking-2507") return render_qwen3(messages, options, Qwen3Variant::thinking_2507);
    if (template_name == "deepseek4") return render_deepseek4(messages, options);
    if (template_name == "deepseek4-flash-0731") return render_deepseek4_flash_0731(messages, options);
    if (template_name == kRawChat) return render_raw(messages);
    throw Error("unknown chat template \"" + std::string(template_name) + "\"; ds4 knows: " + chat_template_list() +
                " (and " + std::string(kRawChat) + ").");
}

namespace {

bool contains_all(std::string_view source, std::span<const std::string_view> fragments) {
    for (std::string_view fragment : fragments) {
        if (source.find(fragment) == std::string_view::npos) return false;
    }
    return true;
}

// DeepSeek V4: the DSML tool-call markup, the <think>-style reasoning and
// the reasoning-effort preamble together (V3.2 has DSML but no efforts, V3.1
// neither). The Flash-0731 revision adds a "high" effort with different
// preamble texts.
std::string detect_deepseek4(std::string_view source) {
    static constexpr std::array<std::string_view, 9> kFragments = {
        "{%- set dsml_token = '\xEF\xBD\x9C" "DSML\xEF\xBD\x9C' -%}",
        "<\xEF\xBD\x9C" "User\xEF\xBD\x9C>",
        "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>",
        "{%- set thinking_start_token = '<think>' -%}",
        "reasoning_effort == 'max'",
        "set keep_reasoning = thinking and ((not drop_thinking) or has_tools or is_after_last_user or ns.has_tool_calls)",
        "'<tool_result>' + (message['content'] or '') + '</tool_result>'",
        "(val | tojson)",
        "'\\n\\n<' + dsml_token + 'tool_calls>\\n'",
    };
    if (!contains_all(source, kFragments)) return "";
    const bool has_high = source.find("reasoning_effort == 'high'") != std::string_view::npos;
    const bool beyond_max = source.find("Reasoning Effort: Beyond maximum") != std::string_view::npos;
    if (has_high && beyond_max) return "deepseek4-flash-0731";
    if (!has_high && !beyond_max) return "deepseek4";
    return "";  // a mix of the two: some revision ds4 has not been checked against
}

// Qwen3: the body every revision shares, one of the two spellings of that
// body, then the way it opens the assistant turn. Fragments that, together,
// no other template in llama.cpp's collection has: Qwen3.5 and Qwen3-VL add
// vision content, QwQ lacks the reasoning split, MiniCPM/Ling copy parts of
// it. A false match would silently render a wrong prompt, so every fragment
// must be present and only the combinations checked against the real
// templates are accepted; anything else is a clear error later instead.
std::string detect_qwen3(std::string_view source) {
    static constexpr std::array<std::string_view, 6> kShared = {
        "<|im_start|>",
        "ns.multi_step_tool",
        "ns.last_query_index",
        "reasoning_content.strip('\\n')",
        "'\\n<tool_response>\\n'",
        "'<|im_start|>' + message.role + '\\n<think>\\n'",
    };
    // Qwen3 (April 2025) reads message.content directly ...
    static constexpr std::array<std::string_view, 2> kBodyApril = {
        "message.content.split('</think>')[-1].lstrip('\\n')",
        "message.reasoning_content is defined and message.reasoning_content is not none",
    };
    // ... the 2507 revision first copies string content into `content`.
    static constexpr std::array<std::string_view, 3> kBody2507 = {
        "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}",
        "message.reasoning_content is string",
        "{%- if message.content is string %}",
    };
    static constexpr std::array<std::string_view, 3> kHybridEnd = {
        "enable_thinking is defined and enable_thinking is false",
        "'<think>\\n\\n</think>\\n\\n'",
        "{{- '<|im_start|>assistant\\n' }}",
    };
    static constexpr std::string_view kInstructEnd =
        "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}";
    static constexpr std::string_view kThinkingEnd =
        "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n<think>\\n' }}\n{%- endif %}";

    if (!contains_all(source, kShared)) return "";
    if (source.find("<|vision_start|>") != std::string_view::npos) return "";
    std::string_view trimmed = source;
    while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == ' ')) trimmed.remove_suffix(1);
    const bool switch_free = source.find("enable_thinking") == std::string_view::npos;
    if (contains_all(source, kBodyApril) && contains_all(source, kHybridEnd)) return "qwen3";
    if (contains_all(source, kBody2507) && switch_free) {
        if (trimmed.ends_with(kInstructEnd)) return "qwen3-instruct-2507";
        if (trimmed.ends_with(kThinkingEnd)) return "qwen3-thinking-2507";
    }
    return "";
}

}  // namespace

std::string detect_chat_template(std::string_view jinja_source) {
    if (std::string deepseek = detect_deepseek4(jinja_source); !deepseek.empty()) return deepseek;
    return detect_qwen3(jinja_source);
}

}  // namespace ds4

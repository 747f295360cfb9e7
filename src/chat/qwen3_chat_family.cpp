// Qwen3's chat family: the April 2025 hybrid template and the 2507
// instruct and thinking revisions, and how their Jinja sources are
// recognised.
#include <array>

#include "chat/chat_family.h"

namespace ds4 {
namespace {

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

std::string render_hybrid(const std::vector<ChatMessage>& m, const ChatOptions& o) {
    return render_qwen3(m, o, Qwen3Variant::hybrid);
}
std::string render_instruct_2507(const std::vector<ChatMessage>& m, const ChatOptions& o) {
    return render_qwen3(m, o, Qwen3Variant::instruct_2507);
}
std::string render_thinking_2507(const std::vector<ChatMessage>& m, const ChatOptions& o) {
    return render_qwen3(m, o, Qwen3Variant::thinking_2507);
}

}  // namespace

const ChatFamily& qwen3_chat_family() {
    static const ChatFamily family{"qwen3",
                                   {{"qwen3", render_hybrid},
                                    {"qwen3-instruct-2507", render_instruct_2507},
                                    {"qwen3-thinking-2507", render_thinking_2507}},
                                   detect_qwen3,
                                   {"<think>", "</think>"},
                                   ToolCallSyntax::qwen3};
    return family;
}

}  // namespace ds4

// DeepSeek V4's chat family: the two templates llama.cpp ships and how
// their Jinja sources are recognised.
#include <array>

#include "chat/chat_family.h"

namespace ds4 {
namespace {

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

}  // namespace

const ChatFamily& deepseek4_chat_family() {
    static const ChatFamily family{"deepseek4",
                                   {{"deepseek4", render_deepseek4}, {"deepseek4-flash-0731", render_deepseek4_flash_0731}},
                                   detect_deepseek4,
                                   {"<think>", "</think>"},
                                   ToolCallSyntax::dsml};
    return family;
}

}  // namespace ds4

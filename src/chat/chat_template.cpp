// Choosing a renderer: by name, or from the Jinja source a GGUF carries.
#include <array>
#include <span>

#include "chat/chat.h"
#include "common/error.h"

namespace ds4 {

std::string render_chat(std::string_view template_name, const std::vector<ChatMessage>& messages,
                        const ChatOptions& options) {
    if (template_name == "qwen3") return render_qwen3(messages, options);
    if (template_name == "deepseek4") return render_deepseek4(messages, options);
    if (template_name == "deepseek4-flash-0731") return render_deepseek4_flash_0731(messages, options);
    throw Error("unknown chat template \"" + std::string(template_name) +
                "\"; ds4 knows: qwen3, deepseek4, deepseek4-flash-0731.");
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

}  // namespace

std::string detect_chat_template(std::string_view jinja_source) {
    if (std::string deepseek = detect_deepseek4(jinja_source); !deepseek.empty()) return deepseek;
    // Fragments of the Qwen3 (hybrid thinking) template that, together, no
    // other template in llama.cpp's collection has: Qwen3.5 and Qwen3-VL add
    // vision content, QwQ lacks enable_thinking, MiniCPM/Ling copy parts of
    // it. A false "qwen3" would silently render a wrong prompt, so every
    // fragment must be present; an unrecognised template is a clear error
    // later instead.
    static constexpr std::array<std::string_view, 8> kQwen3Fragments = {
        "<|im_start|>",
        "ns.multi_step_tool",
        "ns.last_query_index",
        "message.content.split('</think>')[-1].lstrip('\\n')",
        "reasoning_content.strip('\\n')",
        "enable_thinking is defined and enable_thinking is false",
        "'<think>\\n\\n</think>\\n\\n'",
        "'<|im_start|>assistant\\n'",
    };
    for (std::string_view fragment : kQwen3Fragments) {
        if (jinja_source.find(fragment) == std::string_view::npos) return "";
    }
    if (jinja_source.find("<|vision_start|>") != std::string_view::npos) return "";
    return "qwen3";
}

}  // namespace ds4

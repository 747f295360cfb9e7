// Choosing a renderer: by name, or from the Jinja source a GGUF carries.
#include <array>

#include "chat/chat.h"
#include "common/error.h"

namespace ds4 {

std::string render_chat(std::string_view template_name, const std::vector<ChatMessage>& messages,
                        const ChatOptions& options) {
    if (template_name == "qwen3") return render_qwen3(messages, options);
    throw Error("unknown chat template \"" + std::string(template_name) + "\"; ds4 knows: qwen3.");
}

std::string detect_chat_template(std::string_view jinja_source) {
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

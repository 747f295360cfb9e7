// Chat rendering: turns a conversation into the exact prompt text a model was
// trained on. Each family's renderer reproduces its Jinja chat template byte
// for byte (the template as rendered by Hugging Face's jinja2 setup), so the
// engine needs no Jinja interpreter and the prompt cannot silently drift.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ds4 {

struct ChatMessage {
    std::string role;     // "system", "user", "assistant" or "tool"
    std::string content;
    // Assistant only. Unset and set-but-empty differ on purpose: the Qwen3
    // template only looks for <think>...</think> inside `content` when the
    // message has no reasoning_content at all.
    std::optional<std::string> reasoning_content;
};

struct ChatOptions {
    bool add_generation_prompt = true;  // end with the opening of an assistant turn
    bool enable_thinking = true;        // false: pre-fill an empty <think> block
};

// Qwen3 (and Qwen3-MoE) template, the one shipped in Qwen/Qwen3-* tokenizer
// configs. Tool calls inside assistant messages are not supported yet; "tool"
// messages (tool results) are. Throws ds4::Error on an empty conversation or
// an unknown role.
std::string render_qwen3(const std::vector<ChatMessage>& messages, const ChatOptions& options);

// Renders with the template called `template_name` ("qwen3"); throws
// ds4::Error naming the known templates when the name is unknown.
std::string render_chat(std::string_view template_name, const std::vector<ChatMessage>& messages,
                        const ChatOptions& options);

// The renderer name for a GGUF's tokenizer.chat_template Jinja source, or ""
// when it is not a template ds4 knows how to render.
std::string detect_chat_template(std::string_view jinja_source);

}  // namespace ds4

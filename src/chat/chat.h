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

// One function call an assistant made, in OpenAI's shape.
struct ChatToolCall {
    std::string name;
    // A JSON object as text, like OpenAI's function.arguments. Kept as text
    // so the key order the caller sent survives (templates print the keys in
    // that order).
    std::string arguments = "{}";
    std::string id = {};  // the API's call id; not rendered (the server's key for the sampled text)
};

struct ChatMessage {
    std::string role;     // "system", "user", "assistant" or "tool" ("developer": DeepSeek V4)
    std::string content;
    // Assistant only. Unset and set-but-empty differ on purpose: the Qwen3
    // template only looks for <think>...</think> inside `content` when the
    // message has no reasoning_content at all.
    std::optional<std::string> reasoning_content;
    // Assistant only: DeepSeek V4 renders them as a DSML block, Qwen3 as
    // <tool_call> JSON elements, GLM as <tool_call> with <arg_key>/<arg_value>.
    std::vector<ChatToolCall> tool_calls = {};
    // Assistant only: the exact text the model sampled for these calls
    // (everything after the message's content, chat/tool_call_text.h), or
    // "". When set it is printed instead of the template's rendering of
    // tool_calls, so the next turn's prompt repeats the sampled bytes and
    // the sequence's KV prefix stays reusable even where the model spaced
    // or ordered its JSON differently from the template.
    std::string sampled_tool_calls = {};
};

struct ChatOptions {
    bool add_generation_prompt = true;  // end with the opening of an assistant turn
    bool enable_thinking = true;        // false: pre-fill an empty <think> block
    // JSON array of OpenAI tool specs ({"type": "function", "function":
    // {...}}), or "" for none. DeepSeek V4 prints each function object into
    // its system prompt, Qwen3 and GLM each whole spec; all in the caller's
    // key order.
    std::string tools = {};
    // The fields below are used by the DeepSeek V4 templates only
    // (drop_thinking by GLM-4.7 too).
    // "" (plain thinking), "max" (think-max) or, with the Flash-0731
    // template, "high"; other values are ignored, as by the template.
    // Only has an effect when enable_thinking is set.
    std::string reasoning_effort = {};
    // false keeps the reasoning of every earlier assistant turn in thinking mode.
    bool drop_thinking = true;
    // JSON value (usually a schema) the reply must follow, or unset.
    std::optional<std::string> response_format = {};
    // Printed first. Leave empty when the tokenizer adds BOS itself.
    std::string bos_token = {};
};

// The Qwen3 templates share one conversation body and differ in how they
// open the assistant turn:
//   hybrid         Qwen3 (April 2025): honours enable_thinking (false
//                  pre-fills an empty <think> block)
//   instruct_2507  Qwen3-*-Instruct-2507: never thinks, ignores enable_thinking
//   thinking_2507  Qwen3-*-Thinking-2507: always opens "<think>\n"
enum class Qwen3Variant { hybrid, instruct_2507, thinking_2507 };

// Qwen3 (and Qwen3-MoE) templates, as shipped in Qwen/Qwen3-* tokenizer
// configs, with tools (ChatOptions::tools, printed into the system turn),
// assistant tool calls (arguments printed as the text given, as the template
// does for string arguments) and "tool" messages (tool results). Throws
// ds4::Error on an empty conversation, an unknown role, or tools that are
// not a JSON array.
std::string render_qwen3(const std::vector<ChatMessage>& messages, const ChatOptions& options,
                         Qwen3Variant variant = Qwen3Variant::hybrid);

// The two DeepSeek V4 templates shipped with llama.cpp: "deepseek4"
// (deepseek-ai-DeepSeek-V4.jinja) and "deepseek4-flash-0731"
// (deepseek-ai-DeepSeek-V4-Flash-0731.jinja), which differ only in the
// reasoning efforts they know ("max" vs "high" and "max", with other text).
// Thinking modes: think (enable_thinking), think-max (enable_thinking and
// reasoning_effort "max") and no-think (!enable_thinking). Throws ds4::Error
// on an unknown role, on tools / arguments / response_format that are not
// valid JSON of the right shape.
std::string render_deepseek4(const std::vector<ChatMessage>& messages, const ChatOptions& options);
std::string render_deepseek4_flash_0731(const std::vector<ChatMessage>& messages, const ChatOptions& options);

// The two GLM template generations llama.cpp ships:
//   glm46  GLM-4.5 / 4.6 (GLM-4.6.jinja): "<|user|>\n...", no-think mode
//          appends "/nothink" to user turns and pre-fills "\n<think></think>"
//   glm47  GLM-4.7 and later (GLM-4.7-Flash.jinja): markers written tight,
//          the generation prompt opens "<think>" (closes it in no-think
//          mode); drop_thinking false is its clear_thinking = false
enum class GlmVariant { glm46, glm47 };

// GLM templates with tools (a system turn listing the specs), assistant
// tool calls as <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>
// ...</tool_call> (arguments must be JSON objects: string values printed as
// they are, others as JSON) and "tool" messages after <|observation|>.
// Throws ds4::Error on an unknown role, tools that are not a JSON array or
// arguments that are not an object.
std::string render_glm(const std::vector<ChatMessage>& messages, const ChatOptions& options, GlmVariant variant);

// The names of the templates ds4 renders, in a fixed order: "qwen3",
// "qwen3-instruct-2507", "qwen3-thinking-2507", "deepseek4",
// "deepseek4-flash-0731", "glm-4.6", "glm-4.7".
const std::vector<std::string>& chat_template_names();
// The same names joined by ", " (for messages and --help).
std::string chat_template_list();

// Not a template: the messages' contents concatenated, nothing added. For
// base models (no chat template) and, chosen on purpose, for models whose
// template ds4 cannot render. The name `--chat-template` accepts for it.
inline constexpr std::string_view kRawChat = "raw";
std::string render_raw(const std::vector<ChatMessage>& messages);

// Renders with the template called `template_name` (one of
// chat_template_names(), or kRawChat); throws ds4::Error naming the known
// templates when the name is unknown.
std::string render_chat(std::string_view template_name, const std::vector<ChatMessage>& messages,
                        const ChatOptions& options);

// The renderer name for a GGUF's tokenizer.chat_template Jinja source, or ""
// when it is not a template ds4 knows how to render.
std::string detect_chat_template(std::string_view jinja_source);

}  // namespace ds4

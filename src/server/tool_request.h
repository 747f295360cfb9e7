// The tools a request offers and how it lets the model use them, from
// OpenAI's `tools` / `tool_choice` (chat completions), the Responses API's
// (flat function tools) or Anthropic's (messages), checked: a problem is
// an ApiError(400) naming the field.
// Both become OpenAI-shaped specs ({"type": "function", "function":
// {"name", "description", "parameters"}}), the shape the chat templates
// print, in the key order the client sent (the templates print keys in
// that order, so the body is read with an order-keeping parser).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ds4 {

struct ToolChoice {
    enum class Mode { automatic, none, required, function };
    Mode mode = Mode::automatic;
    std::string name;  // Mode::function: the function the reply must call
};

struct RequestTools {
    std::string specs;               // JSON array text for ChatOptions::tools, "" when none are offered
    std::vector<std::string> names;  // the functions offered, in order
    ToolChoice choice;
    // Whether the model is shown the tools and its calls are read back:
    // tools offered and tool_choice not "none".
    bool active() const { return !names.empty() && choice.mode != ToolChoice::Mode::none; }
};

// `body` is the whole request body (an object).
RequestTools parse_openai_tools(const nlohmann::ordered_json& body);
RequestTools parse_anthropic_tools(const nlohmann::ordered_json& body);
// Responses: {"type": "function", "name", "description", "parameters",
// "strict"} (the function's fields beside its type, as chat nests them;
// null fields left out; strict is printed, not enforced); tool_choice
// none | auto | required | {"type": "function", "name"}. Hosted tools
// (web search, file search, ...) are refused by name.
RequestTools parse_responses_tools(const nlohmann::ordered_json& body);

// Arguments of a tool call a client sends back in its history (OpenAI's
// function.arguments text): must be a JSON object, else 400 naming `where`.
void check_tool_arguments(const std::string& arguments, const std::string& where);

}  // namespace ds4

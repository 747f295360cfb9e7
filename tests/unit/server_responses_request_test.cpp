// The Responses API request parser (server/responses_request.h), read off
// OpenAI's Responses reference: `input` as a string or items (messages in
// the short and the typed form, text parts, reasoning, function_call and
// function_call_output items, a response's output sent back), instructions
// as the leading system message, flat function tools as the chat specs the
// templates print, the sampling fields and their defaults, what the
// response object repeats; and bad input: a 400 whose param names the
// field, one sentence.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/responses_request.h"

namespace ds4 {
namespace {

using json = nlohmann::json;

TEST(ResponsesRequest, AStringInputAndTheDefaults) {
    const ResponsesRequest r = parse_responses_request(R"({"model": "m", "input": "Hello"})");
    ASSERT_EQ(r.messages.size(), 1u);
    EXPECT_EQ(r.messages[0].role, "user");
    EXPECT_EQ(r.messages[0].content, "Hello");
    EXPECT_EQ(r.model, "m");
    EXPECT_FALSE(r.stream);
    EXPECT_EQ(r.generate.max_tokens, -1);
    EXPECT_EQ(r.generate.top_logprobs, -1);
    EXPECT_EQ(r.generate.sampling.temperature, 1.0f);
    EXPECT_EQ(r.generate.sampling.top_p, 1.0f);
    EXPECT_EQ(r.generate.sampling.top_k, 0);
    EXPECT_EQ(r.generate.sampling.min_p, 0.0f);
    EXPECT_TRUE(r.chat_options.enable_thinking);
    EXPECT_FALSE(r.tools.active());
    EXPECT_EQ(r.echo["instructions"], nullptr);
    EXPECT_EQ(r.echo["max_output_tokens"], nullptr);
    EXPECT_EQ(r.echo["tools"], json::array());
    EXPECT_EQ(r.echo["tool_choice"], "auto");
    EXPECT_EQ(r.echo["temperature"], 1.0);
}

// Log probabilities are reported when `include` asks for them, with
// top_logprobs alternatives (0 unless given); top_logprobs alone asks for
// nothing, as on OpenAI's API, and is echoed either way.
TEST(ResponsesRequest, LogprobsWhenIncluded) {
    const auto top = [](const char* body) { return parse_responses_request(body).generate.top_logprobs; };
    EXPECT_EQ(top(R"({"input": "x", "include": ["message.output_text.logprobs"], "top_logprobs": 3})"), 3);
    EXPECT_EQ(top(R"({"input": "x", "include": ["reasoning.encrypted_content", "message.output_text.logprobs"]})"), 0);
    EXPECT_EQ(top(R"({"input": "x", "top_logprobs": 5})"), -1);
    EXPECT_EQ(parse_responses_request(R"({"input": "x", "top_logprobs": 5})").echo["top_logprobs"], 5);
    EXPECT_EQ(top(R"({"input": "x", "include": ["reasoning.encrypted_content"], "top_logprobs": 20})"), -1);
    EXPECT_EQ(parse_responses_request(R"({"input": "x"})").echo["top_logprobs"], 0);
    EXPECT_EQ(parse_responses_request(R"({"input": "x", "include": ["message.output_text.logprobs"], "top_logprobs": 3})")
                  .echo["top_logprobs"], 3);
}

TEST(ResponsesRequest, ItemsBecomeTheConversation) {
    // A second turn as a stateless client sends it: the first input, the
    // first response's output (reasoning, text, two calls), the calls'
    // outputs, a new question.
    const ResponsesRequest r = parse_responses_request(R"({
        "instructions": "Be brief.", "max_output_tokens": 7, "temperature": 0, "top_p": 0.5, "seed": 42,
        "stream": true, "reasoning": {"effort": "high"},
        "input": [
            {"role": "user", "content": "Weather?"},
            {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "two cities"}]},
            {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
             "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
            {"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "get_weather", "arguments": "{\"city\":\"Lyon\"}"},
            {"type": "function_call_output", "call_id": "call_a", "output": "18 C"},
            {"type": "function_call_output", "call_id": "call_b", "output": [{"type": "input_text", "text": "15 C"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "And "}, {"type": "input_text", "text": "tomorrow?"}]},
            {"type": "function_call", "call_id": "call_c", "name": "get_weather", "arguments": "{}"}]})");
    ASSERT_EQ(r.messages.size(), 7u);
    EXPECT_EQ(r.messages[0].role, "system");
    EXPECT_EQ(r.messages[0].content, "Be brief.");
    EXPECT_EQ(r.messages[1].role, "user");
    const ChatMessage& a = r.messages[2];
    EXPECT_EQ(a.role, "assistant");
    EXPECT_EQ(a.content, "Checking.");
    EXPECT_EQ(a.reasoning_content, std::optional<std::string>("two cities"));
    ASSERT_EQ(a.tool_calls.size(), 2u);
    EXPECT_EQ(a.tool_calls[0].id, "call_a");
    EXPECT_EQ(a.tool_calls[0].name, "get_weather");
    EXPECT_EQ(a.tool_calls[0].arguments, "{\"city\": \"Paris\"}");  // as sent
    EXPECT_EQ(a.tool_calls[1].arguments, "{\"city\":\"Lyon\"}");
    EXPECT_EQ(r.messages[3].role, "tool");
    EXPECT_EQ(r.messages[3].content, "18 C");
    EXPECT_EQ(r.messages[4].content, "15 C");
    EXPECT_EQ(r.messages[5].content, "And tomorrow?");
    // A call after a user message starts an assistant turn of its own.
    EXPECT_EQ(r.messages[6].role, "assistant");
    EXPECT_EQ(r.messages[6].content, "");
    ASSERT_EQ(r.messages[6].tool_calls.size(), 1u);
    EXPECT_FALSE(r.messages[6].reasoning_content.has_value());
    EXPECT_EQ(r.generate.max_tokens, 7);
    EXPECT_EQ(r.generate.sampling.temperature, 0.0f);
    EXPECT_EQ(r.generate.sampling.top_p, 0.5f);
    EXPECT_EQ(r.generate.sampling.seed, 42u);
    EXPECT_TRUE(r.stream);
    EXPECT_EQ(r.chat_options.reasoning_effort, "high");
    EXPECT_EQ(r.echo["instructions"], "Be brief.");
    EXPECT_EQ(r.echo["max_output_tokens"], 7);
    EXPECT_EQ(r.echo["reasoning"]["effort"], "high");
}

TEST(ResponsesRequest, ReasoningAloneIsATurnAndEffortNoneTurnsThinkingOff) {
    const ResponsesRequest r = parse_responses_request(R"({"reasoning": {"effort": "none"}, "input": [
        {"role": "user", "content": "q"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "hm"}]},
        {"role": "user", "content": "q2"}]})");
    ASSERT_EQ(r.messages.size(), 3u);
    EXPECT_EQ(r.messages[1].role, "assistant");
    EXPECT_EQ(r.messages[1].reasoning_content, std::optional<std::string>("hm"));
    EXPECT_FALSE(r.chat_options.enable_thinking);
}

TEST(ResponsesRequest, FunctionToolsBecomeChatSpecs) {
    const ResponsesRequest r = parse_responses_request(R"({"input": "x",
        "tools": [{"type": "function", "name": "get_weather", "description": null, "strict": true,
                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
                  {"type": "function", "name": "now", "description": "The time."}],
        "tool_choice": {"type": "function", "name": "now"}})");
    ASSERT_TRUE(r.tools.active());
    EXPECT_EQ(r.tools.names, (std::vector<std::string>{"get_weather", "now"}));
    EXPECT_EQ(r.tools.choice.mode, ToolChoice::Mode::function);
    EXPECT_EQ(r.tools.choice.name, "now");
    // The function's fields in the order sent, nulls left out.
    EXPECT_EQ(r.tools.specs,
              R"([{"type":"function","function":{"name":"get_weather","strict":true,"parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},)"
              R"({"type":"function","function":{"name":"now","description":"The time."}}])");
    EXPECT_EQ(r.chat_options.tools, r.tools.specs);
    EXPECT_EQ(r.echo["tools"].size(), 2u);
    const ResponsesRequest none = parse_responses_request(R"({"input": "x", "tool_choice": "none",
        "tools": [{"type": "function", "name": "f"}]})");
    EXPECT_FALSE(none.tools.active());
    EXPECT_TRUE(none.chat_options.tools.empty());
}

TEST(ResponsesRequest, BadInputIsA400NamingTheField) {
    auto param = [](const std::string& body) {
        try {
            parse_responses_request(body);
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status(), 400);
            const std::string m = e.what();
            EXPECT_FALSE(m.empty());
            EXPECT_EQ(m.back(), '.') << m;
            EXPECT_EQ(m.find('\n'), std::string::npos) << m;
            return e.param();
        }
        return std::string("accepted");
    };
    EXPECT_EQ(param("not json"), "");
    EXPECT_EQ(param("[]"), "");
    EXPECT_EQ(param(R"({})"), "input");
    EXPECT_EQ(param(R"({"input": 7})"), "input");
    EXPECT_EQ(param(R"({"input": []})"), "input");
    EXPECT_EQ(param(R"({"input": ["x"]})"), "input[0]");
    EXPECT_EQ(param(R"({"input": [{"role": "robot", "content": "x"}]})"), "input[0].role");
    EXPECT_EQ(param(R"({"input": [{"role": 3, "content": "x"}]})"), "input[0].role");
    EXPECT_EQ(param(R"({"input": [{"role": "tool", "content": "x"}]})"), "input[0].role");
    EXPECT_EQ(param(R"({"input": [{"role": "user"}]})"), "input[0].content");
    EXPECT_EQ(param(R"({"input": [{"role": "user", "content": {"text": "x"}}]})"), "input[0].content");
    EXPECT_EQ(param(R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})"),
              "input[0].content[0]");
    EXPECT_EQ(param(R"({"input": [{"role": "user", "content": [{"type": "input_text", "text": 5}]}]})"),
              "input[0].content[0].text");
    EXPECT_EQ(param(R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})"), "input[0].call_id");
    EXPECT_EQ(param(R"({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{\"a\": "}]})"),
              "input[0].arguments");
    EXPECT_EQ(param(R"({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}]})"),
              "input[0].arguments");
    EXPECT_EQ(param(R"({"input": [{"type": "function_call_output", "call_id": "c"}]})"), "input[0].output");
    EXPECT_EQ(param(R"({"input": [{"type": "item_reference", "id": "msg_1"}]})"), "input[0]");
    EXPECT_EQ(param(R"({"input": [{"type": "web_search_call", "id": "ws_1"}]})"), "input[0]");
    EXPECT_EQ(param(R"({"input": "x", "instructions": 1})"), "instructions");
    EXPECT_EQ(param(R"({"input": "x", "max_output_tokens": 0})"), "max_output_tokens");
    EXPECT_EQ(param(R"({"input": "x", "max_output_tokens": "5"})"), "max_output_tokens");
    EXPECT_EQ(param(R"({"input": "x", "temperature": 2.5})"), "temperature");
    EXPECT_EQ(param(R"({"input": "x", "top_p": 0})"), "top_p");
    EXPECT_EQ(param(R"({"input": "x", "seed": 1.5})"), "seed");
    EXPECT_EQ(param(R"({"input": "x", "stream": "yes"})"), "stream");
    EXPECT_EQ(param(R"({"input": "x", "reasoning": {"effort": "extreme"}})"), "reasoning.effort");
    EXPECT_EQ(param(R"({"input": "x", "previous_response_id": "resp_1"})"), "previous_response_id");
    EXPECT_EQ(param(R"({"input": "x", "background": true})"), "background");
    EXPECT_EQ(param(R"({"input": "x", "top_logprobs": 21})"), "top_logprobs");
    EXPECT_EQ(param(R"({"input": "x", "top_logprobs": "3"})"), "top_logprobs");
    EXPECT_EQ(param(R"({"input": "x", "include": ["message.output_text.logprobs", 5]})"), "include");
    EXPECT_EQ(param(R"({"input": "x", "truncation": "auto"})"), "truncation");
    EXPECT_EQ(param(R"({"input": "x", "text": {"format": {"type": "json_object"}}})"), "text.format");
    EXPECT_EQ(param(R"({"input": "x", "tools": {"name": "f"}})"), "tools");
    EXPECT_EQ(param(R"({"input": "x", "tools": [{"type": "web_search_preview"}]})"), "tools[0].type");
    EXPECT_EQ(param(R"({"input": "x", "tools": [{"type": "function"}]})"), "tools[0].name");
    EXPECT_EQ(param(R"({"input": "x", "tools": [{"type": "function", "name": "f", "parameters": []}]})"), "tools[0].parameters");
    EXPECT_EQ(param(R"({"input": "x", "tools": [{"type": "function", "name": "f"}, {"type": "function", "name": "f"}]})"), "tools");
    EXPECT_EQ(param(R"({"input": "x", "tool_choice": "required"})"), "tool_choice");
    EXPECT_EQ(param(R"({"input": "x", "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": "g"}})"),
              "tool_choice.name");
    EXPECT_EQ(param(R"({"input": "x", "tools": [{"type": "function", "name": "f"}], "tool_choice": "sometimes"})"), "tool_choice");
    // Accepted and without effect here: nothing is stored, includes and metadata are echoed or ignored.
    EXPECT_EQ(param(R"({"input": "x", "store": true, "include": ["reasoning.encrypted_content"], "metadata": {"k": "v"},
                        "parallel_tool_calls": false, "truncation": "disabled", "text": {"format": {"type": "text"}},
                        "user": "u"})"),
              "accepted");
}

}  // namespace
}  // namespace ds4

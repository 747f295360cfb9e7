// Tool calls in the server's request and response shapes, without a model
// (a random-weight model never writes a call; the integration test
// tests/integration/test_server_tools.sh sends histories with calls through
// a real server, and tests/oracle/server_tool_stream_sdk_test.cpp replays
// these streams to the official SDKs):
// - requests: OpenAI tools / tool_choice / assistant tool_calls / tool
//   messages and Anthropic tools / tool_use / tool_result become the chat
//   messages and options the renderers take; bad input is a 400 whose one
//   sentence names the field;
// - responses: a reply holding calls, in Qwen3's and DeepSeek V4's syntax,
//   becomes OpenAI tool_calls / Anthropic tool_use blocks, whole and
//   streamed in every cut, the streamed deltas adding up to the whole;
// - memory: the sampled text of the calls comes back for the next turn
//   only when the client sends the calls back unchanged.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "chat/chat.h"
#include "chat/tool_calls.h"
#include "server/anthropic_request.h"
#include "server/anthropic_response.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/tool_call_memory.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

using json = nlohmann::json;

const std::string kTools = R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])";

std::string chat_body(const std::string& extra) {
    return R"({"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": )" + kTools + extra + "}";
}

// The 400 a body gets, and its message.
std::string refusal(const std::string& body, bool anthropic = false) {
    try {
        if (anthropic) parse_anthropic_request(body, false);
        else parse_completion_request(body, true);
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 400);
        return e.what();
    }
    ADD_FAILURE() << "accepted: " << body;
    return "";
}

GenerateResult result(const std::string& text) {
    GenerateResult r;
    r.text = text;
    r.reason = StopReason::end_of_generation;
    r.tokens.assign(7, 1);
    r.prompt_tokens = 30;
    r.cached_tokens = 10;
    return r;
}

const std::string kQwenReply =
    "<think>\nNeed weather.\n</think>\n\nChecking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
    "{\"city\": \"Paris\"}}\n</tool_call>";

// The data lines of an OpenAI stream, [DONE] excluded.
std::vector<json> openai_chunks(const std::string& sse) {
    std::vector<json> out;
    size_t at = 0;
    while ((at = sse.find("data: ", at)) != std::string::npos) {
        const size_t end = sse.find("\n\n", at);
        const std::string data = sse.substr(at + 6, end - at - 6);
        at = end;
        if (data != "[DONE]") out.push_back(json::parse(data));
    }
    return out;
}

}  // namespace

TEST(ServerTools, OpenAIRequestWithToolsAndAToolCallingHistory) {
    const std::string body = R"({"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}],
      "tools": )" + kTools + R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}})";
    const CompletionRequest r = parse_completion_request(body, true);
    ASSERT_EQ(r.messages.size(), 4u);
    ASSERT_EQ(r.messages[2].tool_calls.size(), 1u);
    EXPECT_EQ(r.messages[2].tool_calls[0].id, "call_1");
    EXPECT_EQ(r.messages[2].tool_calls[0].name, "get_weather");
    EXPECT_EQ(r.messages[2].tool_calls[0].arguments, "{\"city\":\"Paris\"}");  // as sent: Qwen3 prints it verbatim
    EXPECT_EQ(r.messages[3].role, "tool");
    EXPECT_EQ(r.messages[3].content, "18 C");
    EXPECT_TRUE(r.tools.active());
    EXPECT_EQ(r.tools.choice.mode, ToolChoice::Mode::function);
    // The specs in the client's key order (the templates print that order).
    EXPECT_EQ(nlohmann::ordered_json::parse(r.chat_options.tools), nlohmann::ordered_json::parse(kTools));
    EXPECT_NE(r.chat_options.tools.find("\"description\":\"Weather.\",\"parameters\""), std::string::npos);
    // tool_choice none: the model is not shown the tools.
    EXPECT_EQ(parse_completion_request(chat_body(R"(, "tool_choice": "none")"), true).chat_options.tools, "");
}

TEST(ServerTools, OpenAIBadToolInputIsA400NamingTheField) {
    EXPECT_NE(refusal(R"({"messages": [{"role": "user", "content": "x"}], "tools": {"a": 1}})").find("'tools' must be an array"), std::string::npos);
    EXPECT_NE(refusal(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"description": "d"}}]})")
                  .find("'tools[0].function.name'"), std::string::npos);
    EXPECT_NE(refusal(chat_body(R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}})")).find("\"nope\""),
              std::string::npos);
    EXPECT_NE(refusal(chat_body(R"(, "tool_choice": "sometimes")")).find("'tool_choice'"), std::string::npos);
    EXPECT_NE(refusal(R"({"messages": [{"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\": "}}]}]})")
                  .find("'messages[1].tool_calls[0].function.arguments'"), std::string::npos);
    EXPECT_NE(refusal(R"({"messages": [{"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}]})")
                  .find("arguments"), std::string::npos);
    EXPECT_NE(refusal(R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})").find("assistant"), std::string::npos);
    EXPECT_NE(refusal(R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})").find("offers none"),
              std::string::npos);
    for (const std::string& m : {refusal(R"({"messages": [{"role": "user", "content": "x"}], "tools": 7})")}) {
        EXPECT_EQ(m.find('\n'), std::string::npos);
        EXPECT_EQ(m.back(), '.');
    }
}

TEST(ServerTools, AnthropicRequestWithToolUseAndToolResult) {
    const std::string body = R"({"max_tokens": 50, "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris", "a": [1, 2.5]}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18 C"}]},
            {"type": "text", "text": "And tomorrow?"}]}],
      "tools": [{"name": "get_weather", "description": "Weather.", "input_schema": {"type": "object"}}],
      "tool_choice": {"type": "auto"}})";
    const AnthropicRequest r = parse_anthropic_request(body, false);
    ASSERT_EQ(r.messages.size(), 4u);
    EXPECT_EQ(r.messages[1].content, "Checking.");
    ASSERT_EQ(r.messages[1].tool_calls.size(), 1u);
    EXPECT_EQ(r.messages[1].tool_calls[0].id, "toolu_1");
    EXPECT_EQ(r.messages[1].tool_calls[0].arguments, "{\"city\": \"Paris\", \"a\": [1, 2.5]}");  // order sent, Python spelling
    EXPECT_EQ(r.messages[2].role, "tool");
    EXPECT_EQ(r.messages[2].content, "18 C");
    EXPECT_EQ(r.messages[3].role, "user");
    EXPECT_EQ(r.messages[3].content, "And tomorrow?");
    EXPECT_EQ(nlohmann::ordered_json::parse(r.chat_options.tools),
              nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
                  "description": "Weather.", "parameters": {"type": "object"}}}])"));
}

TEST(ServerTools, AnthropicBadToolInputIsA400) {
    const std::string user = R"("max_tokens": 5, "messages": [{"role": "user", "content": "x"}])";
    EXPECT_NE(refusal("{" + user + R"(, "tools": "x"})", true).find("'tools'"), std::string::npos);
    EXPECT_NE(refusal("{" + user + R"(, "tools": [{"input_schema": {}}]})", true).find("'tools[0].name'"), std::string::npos);
    EXPECT_NE(refusal("{" + user + R"(, "tools": [{"name": "f", "input_schema": {}}], "tool_choice": {"type": "tool", "name": "g"}})", true)
                  .find("\"g\""), std::string::npos);
    EXPECT_NE(refusal(R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]}]})", true)
                  .find("assistant"), std::string::npos);
    EXPECT_NE(refusal(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "a", "name": "f", "input": "{}"}]}, {"role": "user", "content": "y"}]})", true)
                  .find("input"), std::string::npos);
}

TEST(ServerTools, OpenAIReplyWholeAndStreamedInEveryCut) {
    OpenAIReply::ToolReading reading{ThinkMarkers{"<think>", "</think>"}, false, ToolCallSyntax::qwen3, nullptr};
    const json whole = OpenAIReply(true, "chatcmpl-1", "m", false, reading).body(result(kQwenReply));
    const json& choice = whole["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls");
    EXPECT_EQ(choice["message"]["content"], "Checking.");
    EXPECT_EQ(choice["message"]["reasoning_content"], "Need weather.");
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
    const json& call = choice["message"]["tool_calls"][0];
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["function"]["name"], "get_weather");
    EXPECT_EQ(call["function"]["arguments"], "{\"city\": \"Paris\"}");
    EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);

    for (size_t cut = 1; cut < kQwenReply.size(); ++cut) {
        OpenAIReply stream(true, "chatcmpl-1", "m", true, reading);
        // One statement each: the operands of + are not evaluated in order.
        std::string sse = stream.begin(10);
        sse += stream.text(kQwenReply.substr(0, cut));
        sse += stream.text(kQwenReply.substr(cut));
        sse += stream.end(result(kQwenReply));
        ASSERT_TRUE(sse.ends_with("data: [DONE]\n\n"));
        std::string content, reasoning, name, arguments, id, finish;
        for (const json& c : openai_chunks(sse)) {
            if (c["choices"].empty()) continue;  // usage
            const json& d = c["choices"][0]["delta"];
            if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
            if (d.contains("content")) content += d["content"].get<std::string>();
            if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
            if (d.contains("tool_calls")) {
                const json& t = d["tool_calls"][0];
                EXPECT_EQ(t["index"], 0);
                if (t.contains("id")) {
                    EXPECT_TRUE(id.empty());
                    id = t["id"];
                    name = t["function"]["name"];
                }
                arguments += t["function"]["arguments"].get<std::string>();
            }
        }
        EXPECT_EQ(content, "Checking.") << cut;
        EXPECT_EQ(reasoning, "Need weather.") << cut;
        EXPECT_EQ(name, "get_weather") << cut;
        EXPECT_EQ(arguments, "{\"city\": \"Paris\"}") << cut;
        EXPECT_EQ(finish, "tool_calls") << cut;
        EXPECT_FALSE(id.empty());
    }
}

TEST(ServerTools, AnthropicReplyWholeAndStreamed) {
    const std::string T = "｜DSML｜";
    const std::string reply = "Need weather.</think>Checking.\n\n<" + T + "tool_calls>\n<" + T + "invoke name=\"get_weather\">\n<" +
                              T + "parameter name=\"city\" string=\"true\">Paris</" + T + "parameter>\n</" + T + "invoke>\n</" +
                              T + "tool_calls>";
    const ThinkMarkers markers{"<think>", "</think>"};
    const json whole = AnthropicReply("msg_1", "m", 30, markers, true, ToolCallSyntax::dsml).message(result(reply));
    EXPECT_EQ(whole["stop_reason"], "tool_use");
    ASSERT_EQ(whole["content"].size(), 3u);
    EXPECT_EQ(whole["content"][0]["thinking"], "Need weather.");
    EXPECT_EQ(whole["content"][1]["text"], "Checking.");
    EXPECT_EQ(whole["content"][2]["type"], "tool_use");
    EXPECT_EQ(whole["content"][2]["name"], "get_weather");
    EXPECT_EQ(whole["content"][2]["input"], json::parse(R"({"city": "Paris"})"));

    for (size_t cut = 1; cut < reply.size(); cut += 3) {
        AnthropicReply stream("msg_1", "m", 30, markers, true, ToolCallSyntax::dsml);
        std::string sse = stream.begin(10);
        sse += stream.text(reply.substr(0, cut));
        sse += stream.text(reply.substr(cut));
        sse += stream.end(result(reply));
        std::string partial_json, stop;
        int tool_block = -1;
        for (size_t at = 0; (at = sse.find("data: ", at)) != std::string::npos;) {
            const size_t end = sse.find("\n\n", at);
            const json e = json::parse(sse.substr(at + 6, end - at - 6));
            at = end;
            if (e["type"] == "content_block_start" && e["content_block"]["type"] == "tool_use") {
                tool_block = e["index"];
                EXPECT_EQ(e["content_block"]["name"], "get_weather");
            }
            if (e["type"] == "content_block_delta" && e["delta"]["type"] == "input_json_delta") {
                EXPECT_EQ(e["index"], tool_block);
                partial_json += e["delta"]["partial_json"].get<std::string>();
            }
            if (e["type"] == "message_delta") stop = e["delta"]["stop_reason"];
        }
        EXPECT_EQ(tool_block, 2) << cut;
        EXPECT_EQ(json::parse(partial_json), json::parse(R"({"city": "Paris"})")) << cut;
        EXPECT_EQ(stop, "tool_use") << cut;
    }
}

TEST(ServerTools, MemoryGivesBackTheSampledTextForUnchangedCalls) {
    ToolCallMemory memory(2);
    // The model spaced its JSON unlike the template.
    const std::string reply = "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>";
    OpenAIReply::ToolReading reading{std::nullopt, false, ToolCallSyntax::qwen3, &memory};
    const json body = OpenAIReply(true, "c", "m", false, reading).body(result(reply));
    const json& call = body["choices"][0]["message"]["tool_calls"][0];
    EXPECT_EQ(memory.size(), 1u);

    ChatMessage back{"assistant", "", std::nullopt};
    back.tool_calls = {{"get_weather", "{\"city\": \"Paris\"}", call["id"]}};  // re-serialized by the client: same JSON
    std::vector<ChatMessage> chat = {{"user", "q", {}}, back, {"tool", "18 C", {}}};
    memory.restore(chat);
    EXPECT_EQ(chat[1].sampled_tool_calls, reply);
    const std::string rendered = render_qwen3(chat, ChatOptions{});
    EXPECT_NE(rendered.find("<|im_start|>assistant\n" + reply + "<|im_end|>"), std::string::npos);

    // An edited call renders from its parts.
    chat[1].sampled_tool_calls.clear();
    chat[1].tool_calls[0].arguments = "{\"city\": \"Lyon\"}";
    memory.restore(chat);
    EXPECT_EQ(chat[1].sampled_tool_calls, "");
    // The oldest replies are forgotten first.
    memory.remember({{"f", "{}", "call_a"}}, "x");
    memory.remember({{"f", "{}", "call_b"}}, "y");
    chat[1].tool_calls[0].arguments = "{\"city\": \"Paris\"}";
    memory.restore(chat);
    EXPECT_EQ(chat[1].sampled_tool_calls, "");
    EXPECT_EQ(memory.size(), 2u);
}

}  // namespace ds4

namespace ds4 {

TEST(ServerTools, AForcedCallIsTheReplysFirstText) {
    // The prompt ended with the opening of a get_weather call; the model
    // wrote the rest. Whole and streamed, the call is the reply's.
    const std::string forced = forced_tool_call_opening(ToolCallSyntax::qwen3, "get_weather", false, "</think>");
    const std::string sampled = "{\"city\": \"Paris\"}}\n</tool_call>";
    OpenAIReply::ToolReading reading{ThinkMarkers{"<think>", "</think>"}, false, ToolCallSyntax::qwen3, nullptr, forced};
    const json whole = OpenAIReply(true, "c", "m", false, reading).body(result(sampled));
    ASSERT_EQ(whole["choices"][0]["message"]["tool_calls"].size(), 1u);
    EXPECT_EQ(whole["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Paris\"}");
    EXPECT_EQ(whole["choices"][0]["finish_reason"], "tool_calls");
    OpenAIReply stream(true, "c", "m", false, reading);
    const std::string opening = stream.begin(0);
    EXPECT_NE(opening.find("\"name\":\"get_weather\""), std::string::npos) << opening;  // announced before any token
    std::string sse = opening;
    sse += stream.text(sampled);
    sse += stream.end(result(sampled));
    EXPECT_NE(sse.find("\"finish_reason\":\"tool_calls\""), std::string::npos);

    AnthropicReply a("msg", "m", 30, ThinkMarkers{"<think>", "</think>"}, false, ToolCallSyntax::qwen3, nullptr, forced);
    const json message = a.message(result(sampled));
    EXPECT_EQ(message["stop_reason"], "tool_use");
    EXPECT_EQ(message["content"].back()["input"], json::parse(R"({"city": "Paris"})"));
}

TEST(ServerTools, AnthropicForcedChoiceCannotFollowAPrefill) {
    EXPECT_NE(refusal(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "Sure"}],
        "tools": [{"name": "f", "input_schema": {}}], "tool_choice": {"type": "any"}})", true).find("prefill"), std::string::npos);
}

}  // namespace ds4

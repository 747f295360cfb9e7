// Responses API responses (server/responses_response.h) from replies a
// random-weight model in the integration test never writes: reasoning then
// an answer, an answer with two tool calls (Qwen3's syntax), a forced call,
// a reply cut off by the token limit, an empty reply and a failure. For
// every way of cutting the reply into streamed pieces: the events follow
// the lifecycle exactly (names, sequence numbers 0, 1, 2, ..., output and
// content indices), accumulating them as the SDK does (item added, part
// added, deltas appended) gives the items output_item.done reports and the
// final event's response holds, and those equal the whole response's
// output, ids aside (each response draws its own).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "chat/tool_calls.h"
#include "server/responses_response.h"
#include "server/tool_call_memory.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

using json = nlohmann::json;

const ThinkMarkers kMarkers{"<think>", "</think>"};

GenerateResult result(const std::string& text, StopReason reason = StopReason::end_of_generation) {
    GenerateResult r;
    r.text = text;
    r.reason = reason;
    r.tokens.assign(9, 1);
    r.prompt_tokens = 30;
    r.cached_tokens = 12;
    return r;
}

ResponsesReplySetup setup(ToolCallSyntax syntax = ToolCallSyntax::none, ToolCallMemory* memory = nullptr,
                          std::string forced = {}) {
    ResponsesReplySetup s;
    s.id = "resp_1";
    s.model = "m";
    s.echo = {{"instructions", nullptr}, {"tools", json::array()}, {"temperature", 1.0}};
    s.think = kMarkers;
    s.syntax = syntax;
    s.memory = memory;
    s.forced = std::move(forced);
    return s;
}

struct Event {
    std::string name;
    json data;
};

std::vector<Event> parse_events(const std::string& sse) {
    std::vector<Event> out;
    size_t at = 0;
    while (at < sse.size()) {
        const size_t end = sse.find("\n\n", at);
        EXPECT_NE(end, std::string::npos);
        const std::string block = sse.substr(at, end - at);
        at = end + 2;
        const size_t nl = block.find('\n');
        EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
        EXPECT_EQ(block.compare(nl + 1, 6, "data: "), 0) << block;
        Event e{block.substr(7, nl - 7), json::parse(block.substr(nl + 7))};
        EXPECT_EQ(e.data["type"], e.name);
        out.push_back(std::move(e));
    }
    return out;
}

// The reply in random pieces; the events it streams.
std::vector<Event> stream(ResponsesReply& reply, const std::string& text, const GenerateResult& r, std::mt19937_64& rng) {
    std::string sse = reply.begin(r.cached_tokens);
    for (size_t at = 0; at < text.size();) {
        const size_t n = 1 + rng() % 7;
        sse += reply.text(text.substr(at, n));
        at += n;
    }
    sse += reply.end(r);
    return parse_events(sse);
}

json without_ids(json items) {
    for (json& it : items) {
        it.erase("id");
        it.erase("call_id");
    }
    return items;
}

// Checks the lifecycle and accumulates the stream as the SDK does; returns
// the final event's response. `names` gets the event names with runs of
// deltas collapsed to one.
json check_lifecycle(const std::vector<Event>& events, std::vector<std::string>& names) {
    EXPECT_GE(events.size(), 3u);
    json snapshot;
    std::vector<json> done;
    for (size_t i = 0; i < events.size(); ++i) {
        const std::string& n = events[i].name;
        const json& d = events[i].data;
        EXPECT_EQ(d["sequence_number"], i) << n;
        if (names.empty() || names.back() != n || n.find(".delta") == std::string::npos) names.push_back(n);
        if (n == "response.created") {
            EXPECT_EQ(i, 0u);
            snapshot = d["response"];
            EXPECT_EQ(snapshot["status"], "in_progress");
            EXPECT_EQ(snapshot["output"], json::array());
            EXPECT_TRUE(snapshot["usage"].is_null());
        } else if (n == "response.in_progress") {
            EXPECT_EQ(i, 1u);
        } else if (n == "response.output_item.added") {
            EXPECT_EQ(d["output_index"], snapshot["output"].size());
            EXPECT_EQ(d["item"]["status"], "in_progress");
            snapshot["output"].push_back(d["item"]);
        } else if (n == "response.content_part.added") {
            json& item = snapshot["output"][d["output_index"].get<size_t>()];
            EXPECT_EQ(d["item_id"], item["id"]);
            EXPECT_EQ(d["content_index"], item["content"].size());
            item["content"].push_back(d["part"]);
        } else if (n == "response.output_text.delta" || n == "response.reasoning_text.delta") {
            json& item = snapshot["output"][d["output_index"].get<size_t>()];
            EXPECT_EQ(d["item_id"], item["id"]);
            EXPECT_EQ(item["type"], n == "response.output_text.delta" ? "message" : "reasoning");
            json& part = item["content"][d["content_index"].get<size_t>()];
            part["text"] = part["text"].get<std::string>() + d["delta"].get<std::string>();
            if (n == "response.output_text.delta")  // each delta: the log probabilities of its tokens
                for (const json& e : d["logprobs"]) part["logprobs"].push_back(e);
            else
                EXPECT_FALSE(d.contains("logprobs")) << d;
        } else if (n == "response.function_call_arguments.delta") {
            json& item = snapshot["output"][d["output_index"].get<size_t>()];
            EXPECT_EQ(d["item_id"], item["id"]);
            item["arguments"] = item["arguments"].get<std::string>() + d["delta"].get<std::string>();
        } else if (n == "response.output_text.done" || n == "response.reasoning_text.done") {
            const json& item = snapshot["output"][d["output_index"].get<size_t>()];
            EXPECT_EQ(d["text"], item["content"][0]["text"]);
            if (n == "response.output_text.done") EXPECT_EQ(d["logprobs"], item["content"][0]["logprobs"]);
        } else if (n == "response.function_call_arguments.done") {
            const json& item = snapshot["output"][d["output_index"].get<size_t>()];
            EXPECT_EQ(d["arguments"], item["arguments"]);
            EXPECT_EQ(d["name"], item["name"]);
        } else if (n == "response.content_part.done") {
            EXPECT_EQ(d["part"], snapshot["output"][d["output_index"].get<size_t>()]["content"][0]);
        } else if (n == "response.output_item.done") {
            json item = d["item"];
            EXPECT_EQ(d["output_index"], done.size());
            json accumulated = snapshot["output"][d["output_index"].get<size_t>()];
            accumulated["status"] = item["status"];
            EXPECT_EQ(accumulated, item);
            done.push_back(item);
        } else {
            EXPECT_EQ(i + 1, events.size()) << n << " is not the last event";
        }
    }
    const json final = events.back().data["response"];
    EXPECT_EQ(final["output"], json(done));
    return final;
}

TEST(ResponsesReply, ReasoningThenAnswer) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const std::string text = "<think>\nwhy not\n</think>\n\nBecause.";
    const GenerateResult r = result(text);
    const json whole = ResponsesReply(setup()).response(r);
    EXPECT_EQ(whole["object"], "response");
    EXPECT_EQ(whole["id"], "resp_1");
    EXPECT_EQ(whole["status"], "completed");
    EXPECT_TRUE(whole["incomplete_details"].is_null());
    EXPECT_TRUE(whole["error"].is_null());
    EXPECT_EQ(whole["model"], "m");
    EXPECT_EQ(whole["temperature"], 1.0);
    EXPECT_EQ(without_ids(whole["output"]), json::parse(R"([
        {"type": "reasoning", "status": "completed", "summary": [], "content": [{"type": "reasoning_text", "text": "why not"}]},
        {"type": "message", "status": "completed", "role": "assistant",
         "content": [{"type": "output_text", "text": "Because.", "annotations": [], "logprobs": []}]}])"));
    EXPECT_EQ(whole["output"][0]["id"].get<std::string>().rfind("rs_", 0), 0u);
    EXPECT_EQ(whole["output"][1]["id"].get<std::string>().rfind("msg_", 0), 0u);
    EXPECT_EQ(whole["usage"], json::parse(R"({"input_tokens": 30, "input_tokens_details": {"cached_tokens": 12},
        "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 39})"));
    for (int round = 0; round < 100; ++round) {
        ResponsesReply reply(setup());
        std::vector<std::string> names;
        const json final = check_lifecycle(stream(reply, text, r, rng), names);
        ASSERT_EQ(names, (std::vector<std::string>{
                             "response.created", "response.in_progress",
                             "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
                             "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
                             "response.output_item.added", "response.content_part.added", "response.output_text.delta",
                             "response.output_text.done", "response.content_part.done", "response.output_item.done",
                             "response.completed"}));
        ASSERT_EQ(without_ids(final["output"]), without_ids(whole["output"]));
        ASSERT_EQ(final["status"], "completed");
        ASSERT_EQ(final["usage"], whole["usage"]);
    }
}

TEST(ResponsesReply, ToolCallsAreFunctionCallItemsRememberedByCallId) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const std::string calls = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
                              "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Lyon\"}}\n</tool_call>";
    const std::string text = "Checking.\n" + calls;
    const GenerateResult r = result(text);
    ToolCallMemory memory;
    const json whole = ResponsesReply(setup(ToolCallSyntax::qwen3, &memory)).response(r);
    EXPECT_EQ(whole["status"], "completed");
    EXPECT_EQ(without_ids(whole["output"]), json::parse(R"([
        {"type": "message", "status": "completed", "role": "assistant",
         "content": [{"type": "output_text", "text": "Checking.", "annotations": [], "logprobs": []}]},
        {"type": "function_call", "status": "completed", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
        {"type": "function_call", "status": "completed", "name": "get_weather", "arguments": "{\"city\":\"Lyon\"}"}])"));
    const json& out = whole["output"];
    EXPECT_EQ(out[1]["id"].get<std::string>().rfind("fc_", 0), 0u);
    EXPECT_EQ(out[1]["call_id"].get<std::string>().rfind("call_", 0), 0u);
    EXPECT_NE(out[1]["call_id"], out[2]["call_id"]);
    // Sent back as items, the calls get their sampled text back by call_id.
    ChatMessage back{"assistant", "Checking.", std::nullopt};
    back.tool_calls = {{"get_weather", "{\"city\":\"Paris\"}", out[1]["call_id"]}, {"get_weather", "{\"city\": \"Lyon\"}", out[2]["call_id"]}};
    std::vector<ChatMessage> conversation = {{"user", "q", std::nullopt}, back};
    memory.restore(conversation);
    EXPECT_EQ(conversation[1].sampled_tool_calls, "\n" + calls);

    for (int round = 0; round < 100; ++round) {
        ResponsesReply reply(setup(ToolCallSyntax::qwen3, &memory));
        std::vector<std::string> names;
        const json final = check_lifecycle(stream(reply, text, r, rng), names);
        ASSERT_EQ(names, (std::vector<std::string>{
                             "response.created", "response.in_progress",
                             "response.output_item.added", "response.content_part.added", "response.output_text.delta",
                             "response.output_text.done", "response.content_part.done", "response.output_item.done",
                             "response.output_item.added", "response.function_call_arguments.delta",
                             "response.function_call_arguments.done", "response.output_item.done",
                             "response.output_item.added", "response.function_call_arguments.delta",
                             "response.function_call_arguments.done", "response.output_item.done",
                             "response.completed"}));
        ASSERT_EQ(without_ids(final["output"]), without_ids(whole["output"]));
    }
}

TEST(ResponsesReply, AForcedCallIsAnnouncedAtOnce) {
    const std::string forced = forced_tool_call_opening(ToolCallSyntax::qwen3, "get_weather", false, "</think>");
    const std::string sampled = "{\"city\": \"Paris\"}}\n</tool_call>";
    const json whole = ResponsesReply(setup(ToolCallSyntax::qwen3, nullptr, forced)).response(result(sampled));
    ASSERT_EQ(whole["output"].size(), 1u);
    EXPECT_EQ(whole["output"][0]["type"], "function_call");
    EXPECT_EQ(whole["output"][0]["arguments"], "{\"city\": \"Paris\"}");
    ResponsesReply s(setup(ToolCallSyntax::qwen3, nullptr, forced));
    const auto opening = parse_events(s.begin(0));
    ASSERT_EQ(opening.size(), 3u);
    EXPECT_EQ(opening[2].name, "response.output_item.added");
    EXPECT_EQ(opening[2].data["item"]["name"], "get_weather");

    // A forced call the model never closes: announced in the stream, it
    // ends "incomplete" and its text follows as a message; the whole
    // response holds only the message.
    const std::string unclosed = "{\"city\": \"Par";
    const GenerateResult cut = result(unclosed, StopReason::max_tokens);
    const json w = ResponsesReply(setup(ToolCallSyntax::qwen3, nullptr, forced)).response(cut);
    ASSERT_EQ(w["output"].size(), 1u);
    EXPECT_EQ(w["output"][0]["type"], "message");
    EXPECT_EQ(w["output"][0]["content"][0]["text"], forced + unclosed);
    std::mt19937_64 rng(7);
    ResponsesReply t(setup(ToolCallSyntax::qwen3, nullptr, forced));
    std::vector<std::string> names;
    const json final = check_lifecycle(stream(t, unclosed, cut, rng), names);
    ASSERT_EQ(final["output"].size(), 2u);
    EXPECT_EQ(final["output"][0]["type"], "function_call");
    EXPECT_EQ(final["output"][0]["status"], "incomplete");
    EXPECT_EQ(final["output"][1]["content"], w["output"][0]["content"]);
    EXPECT_EQ(final["status"], "incomplete");
}

TEST(ResponsesReply, TheTokenLimitAnEmptyReplyAndAFailure) {
    std::mt19937_64 rng(test::test_seed());
    const GenerateResult cut = result("The sea is", StopReason::max_tokens);
    const json whole = ResponsesReply(setup()).response(cut);
    EXPECT_EQ(whole["status"], "incomplete");
    EXPECT_EQ(whole["incomplete_details"], json::parse(R"({"reason": "max_output_tokens"})"));
    EXPECT_EQ(whole["output"][0]["status"], "incomplete");
    ResponsesReply s(setup());
    std::vector<std::string> names;
    const auto events = stream(s, cut.text, cut, rng);
    const json final = check_lifecycle(events, names);
    EXPECT_EQ(events.back().name, "response.incomplete");
    EXPECT_EQ(final["status"], "incomplete");
    EXPECT_EQ(final["incomplete_details"], whole["incomplete_details"]);
    EXPECT_EQ(without_ids(final["output"]), without_ids(whole["output"]));

    // Nothing at all: one empty message, whole and streamed.
    const GenerateResult empty = result("");
    const json e = ResponsesReply(setup()).response(empty);
    ASSERT_EQ(e["output"].size(), 1u);
    EXPECT_EQ(e["output"][0]["content"][0]["text"], "");
    ResponsesReply es(setup());
    names.clear();
    EXPECT_EQ(without_ids(check_lifecycle(stream(es, "", empty, rng), names)["output"]), without_ids(e["output"]));

    GenerateResult failed = result("", StopReason::failed);
    failed.error = "the step failed.";
    ResponsesReply f(setup());
    std::string sse = f.begin(0);  // (the operands of + are not evaluated in order)
    sse += f.end(failed);
    const auto fe = parse_events(sse);
    ASSERT_EQ(fe.size(), 3u);
    EXPECT_EQ(fe[2].name, "response.failed");
    EXPECT_EQ(fe[2].data["response"]["status"], "failed");
    EXPECT_EQ(fe[2].data["response"]["error"]["message"], "the step failed.");
    EXPECT_EQ(fe[2].data["sequence_number"], 2);
}

}  // namespace
}  // namespace ds4

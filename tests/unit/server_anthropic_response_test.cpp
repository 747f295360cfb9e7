// Anthropic responses (server/anthropic_response.h) from a reply that
// reasons and then answers, which a random-weight model in the integration
// tests never writes: the stream's events, parsed back, follow the
// lifecycle with a thinking block 0 closed before text block 1, the deltas
// rebuild the reply's parts, and accumulating the events as the SDK does
// gives the whole message; for every way of cutting the reply into pieces.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "server/anthropic_response.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

using json = nlohmann::json;

std::vector<std::pair<std::string, json>> parse_events(const std::string& sse) {
    std::vector<std::pair<std::string, json>> out;
    size_t at = 0;
    while (at < sse.size()) {
        const size_t end = sse.find("\n\n", at);
        EXPECT_NE(end, std::string::npos);
        const std::string block = sse.substr(at, end - at);
        at = end + 2;
        const size_t nl = block.find('\n');
        EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
        EXPECT_EQ(block.compare(nl + 1, 6, "data: "), 0) << block;
        const std::string name = block.substr(7, nl - 7);
        json data = json::parse(block.substr(nl + 7));
        EXPECT_EQ(data["type"], name);
        out.emplace_back(name, std::move(data));
    }
    return out;
}

GenerateResult result(const std::string& text, StopReason reason, int64_t n_tokens, int64_t cached) {
    GenerateResult r;
    r.text = text;
    r.reason = reason;
    r.tokens.assign(static_cast<size_t>(n_tokens), 1);
    r.prompt_tokens = 20;
    r.cached_tokens = cached;
    return r;
}

TEST(AnthropicReply, ReasoningThenAnswerStreamsAsTwoBlocks) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const ThinkMarkers markers{"<think>", "</think>"};
    const std::string reply = "<think>\nwhy not\n</think>\n\nBecause.";
    const GenerateResult r = result(reply, StopReason::end_of_generation, 9, 5);
    const json whole = AnthropicReply("msg_1", "m", 20, markers, false).message(r);
    ASSERT_EQ(whole["content"], json::parse(R"([{"type":"thinking","thinking":"why not","signature":""},
                                                {"type":"text","text":"Because."}])"));
    EXPECT_EQ(whole["stop_reason"], "end_turn");
    EXPECT_EQ(whole["usage"], json::parse(R"({"input_tokens":15,"cache_creation_input_tokens":0,
                                              "cache_read_input_tokens":5,"output_tokens":9})"));
    for (int round = 0; round < 200; ++round) {
        AnthropicReply stream("msg_1", "m", 20, markers, false);
        std::string sse = stream.begin(5);
        for (size_t at = 0; at < reply.size();) {
            const size_t len = std::min<size_t>(reply.size() - at, 1 + rng() % 6);
            sse += stream.text(std::string_view(reply).substr(at, len));
            at += len;
        }
        sse += stream.end(r);
        const auto events = parse_events(sse);
        std::vector<std::string> names;
        json message;
        for (const auto& [name, d] : events) {
            if (name != "content_block_delta" || names.back() != "content_block_delta") names.push_back(name);
            // The SDK's accumulation.
            if (name == "message_start") message = d["message"];
            if (name == "content_block_start") {
                ASSERT_EQ(d["index"], message["content"].size());
                message["content"].push_back(d["content_block"]);
            }
            if (name == "content_block_delta") {
                json& block = message["content"][d["index"].get<size_t>()];
                const std::string field = d["delta"]["type"] == "thinking_delta" ? "thinking" : "text";
                ASSERT_EQ(block["type"], field);
                block[field] = block[field].get<std::string>() + d["delta"][field].get<std::string>();
            }
            if (name == "message_delta") {
                message["stop_reason"] = d["delta"]["stop_reason"];
                message["stop_sequence"] = d["delta"]["stop_sequence"];
                message["usage"]["output_tokens"] = d["usage"]["output_tokens"];
            }
        }
        ASSERT_EQ(names, (std::vector<std::string>{"message_start", "content_block_start", "ping", "content_block_delta",
                                                   "content_block_stop", "content_block_start", "content_block_delta",
                                                   "content_block_stop", "message_delta", "message_stop"}));
        ASSERT_EQ(message, whole);
    }
}

TEST(AnthropicReply, StopSequenceEmptyReplyAndFailure) {
    GenerateResult r = result("", StopReason::stop_string, 3, 0);
    r.stop_string = "END";
    AnthropicReply a("msg_2", "m", 20, std::nullopt, false);
    const json whole = a.message(r);
    EXPECT_EQ(whole["content"], json::parse(R"([{"type":"text","text":""}])"));
    EXPECT_EQ(whole["stop_reason"], "stop_sequence");
    EXPECT_EQ(whole["stop_sequence"], "END");
    AnthropicReply s("msg_2", "m", 20, std::nullopt, false);
    std::vector<std::string> names;
    for (const auto& [name, d] : parse_events(s.begin(0) + s.end(r))) names.push_back(name);
    EXPECT_EQ(names, (std::vector<std::string>{"message_start", "content_block_start", "ping", "content_block_stop",
                                               "message_delta", "message_stop"}));
    EXPECT_STREQ(anthropic_stop_reason(StopReason::max_tokens), "max_tokens");
    EXPECT_STREQ(anthropic_stop_reason(StopReason::context_full), "model_context_window_exceeded");

    GenerateResult failed = result("", StopReason::failed, 0, 0);
    failed.error = "the step failed.";
    AnthropicReply f("msg_3", "m", 20, std::nullopt, false);
    const auto ev = parse_events(f.begin(0) + f.end(failed));
    ASSERT_EQ(ev.size(), 2u);
    EXPECT_EQ(ev[1].first, "error");
    EXPECT_EQ(ev[1].second["error"]["message"], "the step failed.");
}

}  // namespace
}  // namespace ds4

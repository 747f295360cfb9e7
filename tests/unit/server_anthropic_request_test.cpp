// The Anthropic request parser's mapping onto the chat renderer's input,
// read off Anthropic's Messages reference: system blocks joined into one
// leading system message, an assistant's thinking blocks as its reasoning,
// a final assistant message as the prefill, thinking modes, Anthropic's
// sampling defaults, and the fields a refusal names.
#include <gtest/gtest.h>

#include "server/anthropic_request.h"
#include "server/api_error.h"

namespace ds4 {
namespace {

TEST(AnthropicRequest, MapsAConversation) {
    const AnthropicRequest r = parse_anthropic_request(R"({
        "model": "m", "max_tokens": 9, "stream": true, "stop_sequences": ["END", "\n\n"],
        "system": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief.", "cache_control": {"type": "ephemeral"}}],
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "messages": [
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"},
                                              {"type": "text", "text": "a1"}]},
            {"role": "user", "content": [{"type": "text", "text": "q"}, {"type": "text", "text": "2"}]},
            {"role": "assistant", "content": "The answer is"}]})",
                                                       false);
    ASSERT_EQ(r.messages.size(), 4u);
    EXPECT_EQ(r.messages[0].role, "system");
    EXPECT_EQ(r.messages[0].content, "Be brief.");
    EXPECT_EQ(r.messages[2].role, "assistant");
    EXPECT_EQ(r.messages[2].content, "a1");
    EXPECT_EQ(r.messages[2].reasoning_content, std::optional<std::string>("hm"));
    EXPECT_FALSE(r.messages[1].reasoning_content.has_value());
    EXPECT_EQ(r.messages[3].content, "q2");
    EXPECT_EQ(r.prefill, "The answer is");
    EXPECT_TRUE(r.chat_options.enable_thinking);
    EXPECT_EQ(r.generate.max_tokens, 9);
    EXPECT_EQ(r.generate.stop, (std::vector<std::string>{"END", "\n\n"}));
    EXPECT_TRUE(r.stream);
    EXPECT_EQ(r.model, "m");
}

TEST(AnthropicRequest, DefaultsAndThinkingModes) {
    const std::string msgs = R"("messages": [{"role": "user", "content": "x"}])";
    AnthropicRequest r = parse_anthropic_request("{\"max_tokens\": 1, " + msgs + "}", false);
    EXPECT_FALSE(r.chat_options.enable_thinking);  // Anthropic thinks only when asked
    EXPECT_EQ(r.generate.sampling.temperature, 1.0f);
    EXPECT_EQ(r.generate.sampling.top_k, 0);
    EXPECT_EQ(r.generate.sampling.top_p, 1.0f);
    EXPECT_TRUE(r.prefill.empty());
    r = parse_anthropic_request("{\"thinking\": {\"type\": \"adaptive\"}, " + msgs + "}", true);
    EXPECT_TRUE(r.chat_options.enable_thinking);
    EXPECT_EQ(r.generate.max_tokens, -1);  // count_tokens needs none
    r = parse_anthropic_request("{\"max_tokens\": 3, \"thinking\": {\"type\": \"disabled\"}, " + msgs + "}", false);
    EXPECT_FALSE(r.chat_options.enable_thinking);
    EXPECT_FALSE(r.generate.ignore_eos);
    r = parse_anthropic_request("{\"max_tokens\": 3, \"ignore_eos\": true, " + msgs + "}", false);
    EXPECT_TRUE(r.generate.ignore_eos);
}

TEST(AnthropicRequest, RefusalsNameTheField) {
    auto param = [](const std::string& body) {
        try {
            parse_anthropic_request(body, false);
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status(), 400);
            return e.param();
        }
        return std::string("accepted");
    };
    EXPECT_EQ(param(R"({"messages": [{"role": "user", "content": "x"}]})"), "max_tokens");
    EXPECT_EQ(param(R"({"max_tokens": 2, "messages": [{"role": "user", "content": [{"type": "image"}]}]})"),
              "messages[0].content[0]");
    EXPECT_EQ(param(R"({"max_tokens": 2, "messages": [{"role": "user", "content": [{"type": "thinking", "thinking": "x"}]}]})"),
              "messages[0].content[0]");  // only an assistant thinks
    EXPECT_EQ(param(R"({"max_tokens": 2, "temperature": 1.01, "messages": [{"role": "user", "content": "x"}]})"),
              "temperature");
    EXPECT_EQ(param(R"({"max_tokens": 2, "ignore_eos": 1, "messages": [{"role": "user", "content": "x"}]})"),
              "ignore_eos");
    EXPECT_EQ(param(R"({"max_tokens": 2, "thinking": {"type": "enabled", "budget_tokens": 0}, "messages": [{"role": "user", "content": "x"}]})"),
              "thinking.budget_tokens");
    EXPECT_EQ(param(R"({"max_tokens": 2, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}]}]})"),
              "messages");
}

}  // namespace
}  // namespace ds4

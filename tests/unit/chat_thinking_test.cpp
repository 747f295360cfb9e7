// The streaming reasoning/answer split (chat/thinking.h) against a
// whole-text reference written separately here: random replies made of
// marker fragments, whitespace and text, cut into random pieces, give the
// reference's reasoning and answer, reasoning always before the answer.
// Also: which rendered prompts open a reasoning block, for the real
// renderers.
#include <gtest/gtest.h>

#include <random>

#include "chat/chat.h"
#include "chat/thinking.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

const ThinkMarkers kMarkers{"<think>", "</think>"};

std::string strip(std::string s, bool left, bool right) {
    auto sp = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
    if (right)
        while (!s.empty() && sp(s.back())) s.pop_back();
    size_t i = 0;
    if (left)
        while (i < s.size() && sp(s[i])) ++i;
    return s.substr(i);
}

// The reference: markers found in the whole reply.
std::pair<std::string, std::string> reference(const std::string& reply, bool in_thinking) {
    std::string body = reply;
    if (!in_thinking) {
        const std::string rest = strip(reply, true, false);
        if (rest.rfind("<think>", 0) != 0) return {"", reply};
        body = rest.substr(7);
    }
    const size_t at = body.find("</think>");
    if (at == std::string::npos) return {strip(body, true, true), ""};
    return {strip(body.substr(0, at), true, true), strip(body.substr(at + 8), true, false)};
}

TEST(ChatThinking, StreamingSplitEqualsTheWholeTextSplit) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const std::vector<std::string> parts = {"<think>", "</think>", "<th", "ink>", "</", "think", ">", " ", "\n",
                                            "\n\n", "a", "word", "\xc3\xa9", "<", "/"};
    for (int round = 0; round < 4000; ++round) {
        std::string reply;
        const int n = int(rng() % 12);
        if (rng() % 3 == 0) reply += rng() % 2 ? "\n<think>\n" : "<think>";
        for (int i = 0; i < n; ++i) reply += parts[rng() % parts.size()];
        const bool in_thinking = rng() % 2;
        const auto [want_thinking, want_answer] = reference(reply, in_thinking);

        ThinkingSplitter split(kMarkers, in_thinking);
        std::string thinking, answer;
        bool answer_seen = false;
        auto take = [&](const std::vector<ThinkingSplitter::Piece>& pieces) {
            for (const auto& p : pieces) {
                ASSERT_FALSE(p.text.empty());
                if (p.part == ThinkingSplitter::Part::thinking) {
                    ASSERT_FALSE(answer_seen) << "reasoning after the answer in '" << reply << "'";
                    thinking += p.text;
                } else {
                    answer_seen = true;
                    answer += p.text;
                }
            }
        };
        for (size_t at = 0; at < reply.size();) {
            const size_t len = std::min<size_t>(reply.size() - at, 1 + rng() % 5);
            take(split.push(std::string_view(reply).substr(at, len)));
            at += len;
        }
        take(split.finish());
        ASSERT_EQ(thinking, want_thinking) << "reply '" << reply << "', in_thinking " << in_thinking;
        ASSERT_EQ(answer, want_answer) << "reply '" << reply << "', in_thinking " << in_thinking;
    }
}

TEST(ChatThinking, WithoutMarkersEverythingIsTheAnswer) {
    ThinkingSplitter split(std::nullopt, false);
    const auto pieces = split.push("<think>x</think>y");
    ASSERT_EQ(pieces.size(), 1u);
    EXPECT_EQ(pieces[0].part, ThinkingSplitter::Part::answer);
    EXPECT_EQ(pieces[0].text, "<think>x</think>y");
    EXPECT_TRUE(split.finish().empty());
    EXPECT_FALSE(think_markers("raw").has_value());
}

TEST(ChatThinking, WhichRenderedPromptsOpenReasoning) {
    const std::vector<ChatMessage> chat = {{"user", "hi", {}}};
    ChatOptions think, nothink;
    nothink.enable_thinking = false;
    for (const std::string& name : chat_template_names()) {
        const auto m = think_markers(name);
        ASSERT_TRUE(m.has_value()) << name;
        EXPECT_EQ(m->open, "<think>");
        EXPECT_EQ(m->close, "</think>");
        // The hybrid and instruct templates and GLM-4.6 leave the opening
        // to the model; DeepSeek V4, Qwen3-Thinking-2507 and GLM-4.7 open it
        // in the prompt.
        const bool opens = name.rfind("deepseek4", 0) == 0 || name == "qwen3-thinking-2507" || name == "glm-4.7";
        EXPECT_EQ(prompt_opens_thinking(render_chat(name, chat, think), *m), opens) << name;
        if (name != "qwen3-thinking-2507")
            EXPECT_FALSE(prompt_opens_thinking(render_chat(name, chat, nothink), *m)) << name;
    }
}

}  // namespace
}  // namespace ds4

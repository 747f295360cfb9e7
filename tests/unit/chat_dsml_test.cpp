// DSML parser: hand-written outputs read off the DeepSeek V4 template, every
// cut point of them as a stream, malformed blocks, and random garbage (which
// must never crash and always yields a coherent result). The round trip
// against the real template is tests/oracle/chat_dsml_roundtrip_test.cpp.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "chat/dsml_parse.h"
#include "support/test_seed.h"

using ds4::DsmlStatus;
using ds4::parse_dsml_output;
using nlohmann::ordered_json;

namespace {

const std::string T = "｜DSML｜";
const std::string kEos = "<｜end▁of▁sentence｜>";

std::string param(const std::string& key, bool is_string, const std::string& value) {
    return "<" + T + "parameter name=\"" + key + "\" string=\"" + (is_string ? "true" : "false") + "\">" + value +
           "</" + T + "parameter>\n";
}

// reasoning</think>text + a block with two calls, as the template writes it.
std::string two_calls_output() {
    return "Let me check.</think>Checking now.\n\n<" + T + "tool_calls>\n<" + T + "invoke name=\"get_weather\">\n" +
           param("city", true, "Paris \"Île\"\n<b>") + param("days", false, "3") +
           param("opts", false, "{\"unit\": \"c\", \"hours\": [1, 2.5]}") + "</" + T + "invoke>\n<" + T +
           "invoke name=\"now\">\n\n</" + T + "invoke>\n</" + T + "tool_calls>" + kEos;
}

}  // namespace

TEST(ChatDsml, ParsesReasoningTextAndToolCalls) {
    auto out = parse_dsml_output(two_calls_output(), true, false);
    EXPECT_EQ(out.status, DsmlStatus::complete) << out.error;
    EXPECT_EQ(out.reasoning_content, "Let me check.");
    EXPECT_EQ(out.content, "Checking now.");
    ASSERT_EQ(out.tool_calls.size(), 2u);
    EXPECT_EQ(out.tool_calls[0].name, "get_weather");
    EXPECT_EQ(out.tool_calls[0].arguments,
              ordered_json::parse(R"({"city": "Paris \"Île\"\n<b>", "days": 3, "opts": {"unit": "c", "hours": [1, 2.5]}})"));
    EXPECT_EQ(out.tool_calls[0].arguments.begin().key(), "city");  // order as written
    EXPECT_EQ(out.tool_calls[1].name, "now");
    EXPECT_EQ(out.tool_calls[1].arguments, ordered_json::object());
}

TEST(ChatDsml, PlainAnswersWithAndWithoutThinking) {
    auto out = parse_dsml_output("2 + 2 = 4" + kEos, false, false);
    EXPECT_EQ(out.status, DsmlStatus::complete);
    EXPECT_EQ(out.content, "2 + 2 = 4");
    EXPECT_TRUE(out.reasoning_content.empty());
    out = parse_dsml_output("hmm</think>4", true, false);
    EXPECT_EQ(out.reasoning_content, "hmm");
    EXPECT_EQ(out.content, "4");
    // Cut off while thinking, for good: all of it is reasoning.
    out = parse_dsml_output("still thinking", true, false);
    EXPECT_EQ(out.status, DsmlStatus::complete);
    EXPECT_EQ(out.reasoning_content, "still thinking");
}

TEST(ChatDsml, StreamingHoldsBackTagsThatMayStillArrive) {
    auto out = parse_dsml_output("abc</thi", true, true);
    EXPECT_EQ(out.status, DsmlStatus::incomplete);
    EXPECT_EQ(out.reasoning_content, "abc");
    out = parse_dsml_output("x</think>answer\n\n<｜DS", true, true);
    EXPECT_EQ(out.status, DsmlStatus::incomplete);
    EXPECT_EQ(out.content, "answer\n\n");
    out = parse_dsml_output("answer\n\n<" + T + "tool_calls>\n<" + T + "invoke name=\"f\">\n" + param("a", false, "1"),
                            false, true);
    EXPECT_EQ(out.status, DsmlStatus::incomplete);
    EXPECT_EQ(out.content, "answer");
    EXPECT_TRUE(out.tool_calls.empty());  // the invoke is not finished
}

TEST(ChatDsml, EveryCutPointOfValidOutputIsIncompleteOrConsistent) {
    const auto whole = parse_dsml_output(two_calls_output(), true, false);
    const std::string text = two_calls_output();
    for (size_t cut = 0; cut <= text.size(); ++cut) {
        SCOPED_TRACE("cut at byte " + std::to_string(cut));
        auto p = parse_dsml_output(std::string_view(text).substr(0, cut), true, true);
        ASSERT_NE(p.status, DsmlStatus::malformed) << p.error;
        EXPECT_TRUE(whole.reasoning_content.starts_with(p.reasoning_content));
        EXPECT_TRUE((whole.content + "\n\n").starts_with(p.content)) << p.content;
        ASSERT_LE(p.tool_calls.size(), whole.tool_calls.size());
        for (size_t k = 0; k < p.tool_calls.size(); ++k) {
            EXPECT_EQ(p.tool_calls[k].name, whole.tool_calls[k].name);
            EXPECT_EQ(p.tool_calls[k].arguments, whole.tool_calls[k].arguments);
        }
        if (cut == text.size()) EXPECT_EQ(p.status, DsmlStatus::complete);
        // The same prefix as a finished output is never "incomplete".
        EXPECT_NE(parse_dsml_output(std::string_view(text).substr(0, cut), true, false).status, DsmlStatus::incomplete);
    }
}

TEST(ChatDsml, MalformedBlocksComeBackAsTextWithAReason) {
    const std::string open = "<" + T + "tool_calls>\n<" + T + "invoke name=\"f\">\n";
    const std::string close = "</" + T + "invoke>\n</" + T + "tool_calls>";
    const std::vector<std::string> broken = {
        open + "<" + T + "parameter name=\"a\" string=\"maybe\">1</" + T + "parameter>\n" + close,
        open + param("a", false, "{not json") + close,
        open + "stray words\n" + close,
        "<" + T + "tool_calls>\nnot an invoke\n</" + T + "tool_calls>",
        "<" + T + "tool_calls>\n<" + T + "invoke name=\"f\n\">\n" + close,
        open + param("a", true, "x"),  // never closed, and generation is over
    };
    for (const std::string& block : broken) {
        SCOPED_TRACE(block);
        auto out = parse_dsml_output("before\n\n" + block + " after", false, false);
        EXPECT_EQ(out.status, DsmlStatus::malformed);
        EXPECT_FALSE(out.error.empty());
        EXPECT_TRUE(out.tool_calls.empty());
        EXPECT_TRUE(out.content.starts_with("before\n\n<" + T + "tool_calls>")) << out.content;
    }
    // A well-formed block after a broken one still counts.
    auto out = parse_dsml_output(broken[2] + "\n\n" + open + param("k", true, "v") + close, false, false);
    EXPECT_EQ(out.status, DsmlStatus::malformed);
    ASSERT_EQ(out.tool_calls.size(), 1u);
    EXPECT_EQ(out.tool_calls[0].arguments, ordered_json({{"k", "v"}}));
}

TEST(ChatDsml, RandomGarbageNeverCrashesAndStaysCoherent) {
    const uint64_t seed = ds4::test::test_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const std::vector<std::string> pieces = {
        "<" + T + "tool_calls>", "</" + T + "tool_calls>", "<" + T + "invoke name=\"", "</" + T + "invoke>",
        "<" + T + "parameter name=\"", "</" + T + "parameter>", "\" string=\"true\">", "\" string=\"false\">",
        "\">", "\"", ">", "<", "\n", "\n\n", " ", "</think>", "<think>", kEos, "{", "}", "[1, 2]", "\"s\"", "null",
        "text", "é", "｜", "<｜", "DSML", "\xff", "\x00"};
    for (int i = 0; i < 3000; ++i) {
        std::string text;
        int n = int(rng() % 24);
        for (int k = 0; k < n; ++k) {
            if (rng() % 8 == 0) {
                text += char(rng() % 256);
            } else {
                const std::string& p = pieces[rng() % pieces.size()];
                text += p.empty() ? std::string(1, '\0') : p;
            }
        }
        for (bool thinking : {false, true}) {
            for (bool partial : {false, true}) {
                auto out = parse_dsml_output(text, thinking, partial);
                SCOPED_TRACE(nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
                if (!partial) EXPECT_NE(out.status, DsmlStatus::incomplete);
                EXPECT_EQ(out.status == DsmlStatus::malformed, !out.error.empty());
                EXPECT_LE(out.reasoning_content.size() + out.content.size(), text.size());
                for (const auto& call : out.tool_calls) EXPECT_TRUE(call.arguments.is_object());
            }
        }
    }
}

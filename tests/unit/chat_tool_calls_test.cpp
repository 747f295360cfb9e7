// Reading tool calls back from replies (chat/tool_calls.h,
// chat/reply_parser.h) on replies spelled the way the templates render
// assistant tool calls (the real templates' renderings are checked in
// tests/oracle/chat_qwen3_tool_roundtrip_test.cpp and
// chat_dsml_roundtrip_test.cpp): the content / section split, arguments as
// written, calls inside a reasoning block ignored, malformed calls left as
// text, and every cut point of a reply streamed in two or more pieces giving
// deltas that add up to the whole reply's parts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "chat/chat.h"
#include "chat/reply_parser.h"
#include "chat/tool_calls.h"
#include "support/test_seed.h"

using ds4::Reply;
using ds4::ReplyDelta;
using ds4::ReplyParser;
using ds4::ThinkMarkers;
using ds4::ToolCallSyntax;

namespace {

const ThinkMarkers kThink{"<think>", "</think>"};
const std::string T = "｜DSML｜";

// What the deltas of a stream add up to.
struct Streamed {
    std::string reasoning, content;
    std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

void add(Streamed& s, const std::vector<ReplyDelta>& ds) {
    for (const ReplyDelta& d : ds) {
        switch (d.kind) {
            case ReplyDelta::Kind::reasoning: s.reasoning += d.text; break;
            case ReplyDelta::Kind::content: s.content += d.text; break;
            case ReplyDelta::Kind::call_start:
                ASSERT_EQ(d.call, s.calls.size());
                s.calls.push_back({d.text, ""});
                break;
            case ReplyDelta::Kind::call_arguments:
                ASSERT_LT(d.call, s.calls.size());
                s.calls[d.call].second += d.text;
                break;
        }
    }
}

Reply whole(ToolCallSyntax syntax, const std::string& text, bool opens_thinking = false) {
    ReplyParser p(kThink, opens_thinking, syntax);
    p.push(text);
    p.finish();
    return p.reply();
}

// Every split of `text` into pieces at `cuts` gives deltas equal to the
// whole reply's parts.
void expect_stream_matches(ToolCallSyntax syntax, const std::string& text, bool opens_thinking,
                           const std::vector<size_t>& cuts) {
    const Reply w = whole(syntax, text, opens_thinking);
    ReplyParser p(kThink, opens_thinking, syntax);
    Streamed s;
    size_t at = 0;
    for (size_t cut : cuts) {
        add(s, p.push(std::string_view(text).substr(at, cut - at)));
        at = cut;
    }
    add(s, p.push(std::string_view(text).substr(at)));
    add(s, p.finish());
    std::string where = "cuts";
    for (size_t c : cuts) where += " " + std::to_string(c);
    EXPECT_EQ(s.reasoning, w.reasoning) << where;
    EXPECT_EQ(s.content, w.content) << where;
    // A call whose name was streamed but which never closed (the reply
    // ended in it, or it broke) stays in the stream; the whole reply has
    // it as text. Every call the whole reply has streamed the same.
    ASSERT_GE(s.calls.size(), w.tool_calls.size()) << where;
    for (size_t i = 0; i < w.tool_calls.size(); ++i) {
        EXPECT_EQ(s.calls[i].first, w.tool_calls[i].name) << where;
        EXPECT_EQ(s.calls[i].second, w.tool_calls[i].arguments) << where;
    }
    EXPECT_EQ(p.reply().content, w.content);
    EXPECT_EQ(p.reply().tool_section, w.tool_section);
    // The content sits in the text where answer_offset() says, however the
    // text was cut (the Responses API finds its tokens by it).
    if (!w.content.empty()) {
        ASSERT_NE(p.answer_offset(), std::string::npos) << where;
        EXPECT_EQ(text.substr(p.answer_offset(), w.content.size()), w.content) << where;
    }
}

void expect_every_cut_matches(ToolCallSyntax syntax, const std::string& text, bool opens_thinking) {
    for (size_t cut = 1; cut < text.size(); ++cut) expect_stream_matches(syntax, text, opens_thinking, {cut});
}

const std::string kQwenCalls =
    "<think>\nThe user wants weather.\n</think>\n\nLet me check.\n<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris }\", \"days\": 3, \"opts\": {\"u\": [1, 2]}}}\n"
    "</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";

}  // namespace

TEST(ChatToolCalls, SyntaxFollowsTheFamily) {
    EXPECT_EQ(ds4::tool_call_syntax("qwen3"), ToolCallSyntax::qwen3);
    EXPECT_EQ(ds4::tool_call_syntax("qwen3-thinking-2507"), ToolCallSyntax::qwen3);
    EXPECT_EQ(ds4::tool_call_syntax("deepseek4"), ToolCallSyntax::dsml);
    EXPECT_EQ(ds4::tool_call_syntax("raw"), ToolCallSyntax::none);
}

TEST(ChatToolCalls, Qwen3CallsContentAndSection) {
    const Reply r = whole(ToolCallSyntax::qwen3, kQwenCalls);
    EXPECT_EQ(r.reasoning, "The user wants weather.");
    EXPECT_EQ(r.content, "Let me check.");
    ASSERT_EQ(r.tool_calls.size(), 2u);
    EXPECT_EQ(r.tool_calls[0].name, "get_weather");
    // As written, key order and spacing included.
    EXPECT_EQ(r.tool_calls[0].arguments, "{\"city\": \"Paris }\", \"days\": 3, \"opts\": {\"u\": [1, 2]}}");
    EXPECT_EQ(r.tool_calls[1].name, "now");
    EXPECT_EQ(r.tool_calls[1].arguments, "{}");
    EXPECT_EQ(r.tool_section, kQwenCalls.substr(kQwenCalls.find("\n<tool_call>")));
}

TEST(ChatToolCalls, Qwen3SpellingsTheTemplateDoesNotUseStillParse) {
    Reply r = whole(ToolCallSyntax::qwen3, "<tool_call>{\"name\":\"f\",\"arguments\":{\"a\":1}}</tool_call>");
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].arguments, "{\"a\":1}");
    EXPECT_EQ(r.content, "");
    // Arguments before the name: reported in the templates' spelling.
    r = whole(ToolCallSyntax::qwen3, "<tool_call>\n{\"arguments\": {\"b\":2.5}, \"name\": \"g\"}\n</tool_call>");
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].arguments, "{\"b\": 2.5}");
    // Arguments as a JSON string holding the object.
    r = whole(ToolCallSyntax::qwen3, "<tool_call>\n{\"name\": \"h\", \"arguments\": \"{\\\"c\\\": 1}\"}\n</tool_call>");
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].arguments, "{\"c\": 1}");
}

TEST(ChatToolCalls, MalformedCallsStayText) {
    const std::vector<std::string> malformed = {"Hi <tool_call>\nnot json\n</tool_call>", "<tool_call>\n{\"name\": \"f\"",
                                   "<tool_call>\n{\"arguments\": {}}\n</tool_call>",
                                   "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",
                                   // A member written twice: which one counts is a guess (found by fuzz_server_request).
                                   "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"city\": \"Paris\"}, \"arguments\": {}}\n</tool_call>",
                                   "<tool_call>\n{\"name\": \"f\", \"arguments\": {}, \"name\": \"g\"}\n</tool_call>",
                                   // NUL ends nlohmann's input: the call before it is not the element.
                                   std::string("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n") + '\0' + "{}}\n</tool_call>"};
    for (const std::string& text : malformed) {
        const Reply r = whole(ToolCallSyntax::qwen3, text);
        EXPECT_TRUE(r.tool_calls.empty()) << text;
        EXPECT_EQ(r.content, text);  // streamed too: the held-back text follows at the end
        EXPECT_EQ(r.tool_section, "");
        expect_every_cut_matches(ToolCallSyntax::qwen3, text, false);
    }
    // A good call, then a broken one: the good one stands, the rest is the section.
    const std::string text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{oops\n</tool_call>";
    const Reply r = whole(ToolCallSyntax::qwen3, text);
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_section, text);
}

TEST(ChatToolCalls, CallsInsideReasoningAreNotCalls) {
    const std::string call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
    Reply r = whole(ToolCallSyntax::qwen3, "<think>\nmaybe " + call + "\n</think>\n\nNo tool needed.");
    EXPECT_TRUE(r.tool_calls.empty());
    EXPECT_EQ(r.content, "No tool needed.");
    EXPECT_NE(r.reasoning.find(call), std::string::npos);
    // An unclosed reasoning block (the prompt opened it) is all reasoning.
    r = whole(ToolCallSyntax::qwen3, "thinking " + call, /*opens_thinking=*/true);
    EXPECT_TRUE(r.tool_calls.empty());
    EXPECT_EQ(r.content, "");
    const std::string dsml = "<" + T + "tool_calls>\n<" + T + "invoke name=\"f\">\n</" + T + "invoke>\n</" + T + "tool_calls>";
    r = whole(ToolCallSyntax::dsml, "I could " + dsml + "</think>Done.", /*opens_thinking=*/true);
    EXPECT_TRUE(r.tool_calls.empty());
    EXPECT_EQ(r.content, "Done.");
}

TEST(ChatToolCalls, NoToolsMeansAllContent) {
    const Reply r = whole(ToolCallSyntax::none, kQwenCalls);
    EXPECT_TRUE(r.tool_calls.empty());
    EXPECT_EQ(r.content, kQwenCalls.substr(kQwenCalls.find("Let me")));
}

TEST(ChatToolCalls, DsmlCallsContentAndSection) {
    const std::string block = "\n\n<" + T + "tool_calls>\n<" + T + "invoke name=\"get_weather\">\n<" + T +
                              "parameter name=\"city\" string=\"true\">Paris</" + T + "parameter>\n<" + T +
                              "parameter name=\"days\" string=\"false\">3</" + T + "parameter>\n</" + T +
                              "invoke>\n</" + T + "tool_calls>";
    const std::string text = "Weather first.</think>Checking." + block;
    const Reply r = whole(ToolCallSyntax::dsml, text, /*opens_thinking=*/true);
    EXPECT_EQ(r.reasoning, "Weather first.");
    EXPECT_EQ(r.content, "Checking.");
    EXPECT_EQ(r.tool_section, block);
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].name, "get_weather");
    EXPECT_EQ(r.tool_calls[0].arguments, "{\"city\": \"Paris\", \"days\": 3}");
    expect_every_cut_matches(ToolCallSyntax::dsml, text, true);
}

TEST(ChatToolCalls, EveryCutOfAQwen3ReplyStreamsTheSameParts) {
    expect_every_cut_matches(ToolCallSyntax::qwen3, kQwenCalls, false);
    expect_every_cut_matches(ToolCallSyntax::qwen3, "Sure.\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": \"}}\"}}\n</tool_call>", false);
}

// Found by the request fuzzer: a member after "arguments" (the stream had
// reported its text as arguments), and a DSML invoke without a name (the
// whole reply reported a nameless call the stream never announced).
TEST(ChatToolCalls, MembersAfterTheArgumentsAndNamelessCallsStreamAsTheWhole) {
    const std::string after = "Hi\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"city\": \"Paris\"}, \"argu}ents\": {}}\n</tool_call>";
    const Reply r = whole(ToolCallSyntax::qwen3, after);
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].arguments, "{\"city\": \"Paris\"}");
    expect_every_cut_matches(ToolCallSyntax::qwen3, after, false);
    const std::string nameless = "Checking.\n\n<\uff5cDSML\uff5ctool_calls>\n<\uff5cDSML\uff5cinvoke name=\"\">\n"
                                 "</\uff5cDSML\uff5cinvoke>\n</\uff5cDSML\uff5ctool_calls>";
    EXPECT_TRUE(whole(ToolCallSyntax::dsml, nameless).tool_calls.empty());
    expect_every_cut_matches(ToolCallSyntax::dsml, nameless, false);
}

TEST(ChatToolCalls, Qwen3ArgumentsStreamInPieces) {
    // The arguments arrive as deltas while the call is being written, not
    // all at its end.
    ReplyParser p(kThink, false, ToolCallSyntax::qwen3);
    Streamed s;
    const std::string text = "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"long text here\", \"n\": 5}}\n</tool_call>";
    size_t argument_deltas = 0;
    for (size_t i = 0; i < text.size(); i += 4) {
        auto ds = p.push(text.substr(i, 4));
        for (const auto& d : ds) argument_deltas += d.kind == ReplyDelta::Kind::call_arguments;
        add(s, ds);
    }
    add(s, p.finish());
    EXPECT_GT(argument_deltas, 5u);
    ASSERT_EQ(s.calls.size(), 1u);
    EXPECT_EQ(s.calls[0].second, "{\"query\": \"long text here\", \"n\": 5}");
}

TEST(ChatToolCalls, RandomPiecesOfRandomRepliesMatchTheWhole) {
    const uint64_t seed = ds4::test::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with DS4_TEST_SEED)");
    std::mt19937_64 rng(seed);
    auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
    const std::vector<std::string> parts = {
        "<think>", "</think>", "\n", "\n\n", " ", "text", "<tool_call>", "</tool_call>", "<tool", "{", "}",
        "{\"name\": \"f\", \"arguments\": {\"a\": \"x}\"}}", "{\"name\": \"g\", \"arguments\": {}}", "\"", "é中🙂",
        "<" + T + "tool_calls>", "</" + T + "tool_calls>", "<" + T + "invoke name=\"f\">", "</" + T + "invoke>"};
    for (int round = 0; round < 400; ++round) {
        std::string text;
        for (int n = int(rng() % 12); n > 0; --n) text += pick(parts);
        if (rng() % 2) text += "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"k\": [1, {\"x\": null}]}}\n</tool_call>";
        const auto syntax = rng() % 2 ? ToolCallSyntax::qwen3 : ToolCallSyntax::dsml;
        std::vector<size_t> cuts;
        for (size_t at = 0; text.size() > 1;) {
            at += 1 + rng() % 6;
            if (at >= text.size()) break;
            cuts.push_back(at);
        }
        // Cuts inside a UTF-8 character are fine here: the parser works on bytes.
        expect_stream_matches(syntax, text, rng() % 3 == 0, cuts);
        if (HasFailure()) {
            ADD_FAILURE() << "text " << nlohmann::json(text).dump();
            return;
        }
    }
}

TEST(ChatToolCalls, SampledTextReplacesTheTemplatesRendering) {
    // The section a reply was parsed into, handed back, re-renders the turn
    // byte for byte even where the template would spell it differently.
    const std::string sampled = "<tool_call>\n{\"name\":\"f\",  \"arguments\":{\"a\":1}}\n</tool_call>";
    const Reply r = whole(ToolCallSyntax::qwen3, sampled);
    ASSERT_EQ(r.tool_calls.size(), 1u);
    ds4::ChatMessage assistant{"assistant", r.content, std::string()};
    assistant.tool_calls = {{r.tool_calls[0].name, r.tool_calls[0].arguments, "call_1"}};
    std::vector<ds4::ChatMessage> chat = {{"user", "q", {}}, assistant, {"tool", "42", {}}};
    ds4::ChatOptions o;
    const std::string templated = ds4::render_qwen3(chat, o);
    EXPECT_NE(templated.find("{\"name\": \"f\", \"arguments\": {\"a\":1}}"), std::string::npos) << templated;
    chat[1].sampled_tool_calls = r.tool_section;
    const std::string exact = ds4::render_qwen3(chat, o);
    EXPECT_NE(exact.find("<|im_start|>assistant\n" + sampled + "<|im_end|>"), std::string::npos) << exact;
}

TEST(ChatToolCalls, DsmlCallsRightAfterReasoningReRenderByteForByte) {
    // No content: the template writes "</think>" then the block's "\n\n".
    const std::string block = "\n\n<" + T + "tool_calls>\n<" + T + "invoke name=\"now\">\n\n</" + T + "invoke>\n</" + T +
                              "tool_calls>";
    const std::string sampled = "Time?</think>" + block;
    const Reply r = whole(ToolCallSyntax::dsml, sampled, /*opens_thinking=*/true);
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.content, "");
    EXPECT_EQ(r.tool_section, block);
    ds4::ChatMessage assistant{"assistant", r.content, r.reasoning};
    assistant.tool_calls = {{"now", r.tool_calls[0].arguments, "call_1"}};
    std::vector<ds4::ChatMessage> chat = {{"user", "q", {}}, assistant, {"tool", "noon", {}}};
    ds4::ChatOptions o;
    o.tools = R"([{"type": "function", "function": {"name": "now"}}])";
    const std::string templated = ds4::render_deepseek4(chat, o);
    chat[1].sampled_tool_calls = r.tool_section;
    EXPECT_EQ(ds4::render_deepseek4(chat, o), templated);
    EXPECT_NE(templated.find("<think>" + sampled + "<"), std::string::npos) << templated;
}

TEST(ChatToolCalls, AForcedOpeningLeadsIntoACallOfThatFunction) {
    // Qwen3, named: the model continues with the arguments.
    std::string open = ds4::forced_tool_call_opening(ToolCallSyntax::qwen3, "get_weather", false, "</think>");
    EXPECT_EQ(open, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
    Reply r = whole(ToolCallSyntax::qwen3, open + "{\"city\": \"Paris\"}}\n</tool_call>");
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].name, "get_weather");
    EXPECT_EQ(r.tool_calls[0].arguments, "{\"city\": \"Paris\"}");
    // The prompt opened reasoning: it is closed first, as the template writes a turn.
    open = ds4::forced_tool_call_opening(ToolCallSyntax::qwen3, "", true, "</think>");
    EXPECT_EQ(open, "</think>\n\n<tool_call>\n{\"name\": \"");
    r = whole(ToolCallSyntax::qwen3, open + "now\", \"arguments\": {}}\n</tool_call>", /*opens_thinking=*/true);
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].name, "now");
    EXPECT_EQ(r.reasoning, "");
    // DeepSeek V4.
    open = ds4::forced_tool_call_opening(ToolCallSyntax::dsml, "get_weather", true, "</think>");
    r = whole(ToolCallSyntax::dsml,
              open + "<" + T + "parameter name=\"city\" string=\"true\">Paris</" + T + "parameter>\n</" + T + "invoke>\n</" +
                  T + "tool_calls>",
              /*opens_thinking=*/true);
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].name, "get_weather");
    EXPECT_EQ(r.tool_section.substr(0, 2), "\n\n");
    EXPECT_EQ(ds4::forced_tool_call_opening(ToolCallSyntax::none, "f", false, "</think>"), "");
}

TEST(ChatToolCalls, DsmlCallsAreAnnouncedOnceNamed) {
    ReplyParser p(kThink, false, ToolCallSyntax::dsml);
    Streamed s;
    add(s, p.push("\n\n<" + T + "tool_calls>\n<" + T + "invoke name=\"get_weather\">\n<" + T + "parameter name=\"city\""));
    ASSERT_EQ(s.calls.size(), 1u);
    EXPECT_EQ(s.calls[0].first, "get_weather");
    EXPECT_EQ(s.calls[0].second, "");
    // Each parameter adds to the arguments as it closes.
    add(s, p.push(" string=\"true\">Paris</" + T + "parameter>\n<" + T + "parameter name=\"days\" string=\"false\">"));
    EXPECT_EQ(s.calls[0].second, "{\"city\": \"Paris\"");
    add(s, p.push("[1, 2]</" + T + "parameter>\n"));
    EXPECT_EQ(s.calls[0].second, "{\"city\": \"Paris\", \"days\": [1, 2]");
    add(s, p.push("</" + T + "invoke>\n</" + T + "tool_calls>"));
    add(s, p.finish());
    ASSERT_EQ(s.calls.size(), 1u);
    EXPECT_EQ(s.calls[0].second, "{\"city\": \"Paris\", \"days\": [1, 2]}");
}

// Reading GLM replies back (chat/glm_tool_parse.cpp through
// chat/reply_parser.h) on replies spelled the way GLM's templates render a
// turn (the real templates' renderings are checked in
// tests/oracle/chat_glm_tool_roundtrip_test.cpp): argument values typed by
// the offered schemas or, without one, as JSON when they parse; calls
// inside a reasoning block left as reasoning; malformed calls left as text;
// every cut point of a reply streamed in two pieces giving deltas that add
// up to the whole reply's parts, a call announced once its name is whole;
// the forced openings of both spacings; GLM-4.6's leading newline after a
// pre-filled empty reasoning block not taken for content.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/chat.h"
#include "chat/reply_parser.h"
#include "chat/tool_calls.h"

using ds4::Reply;
using ds4::ReplyDelta;
using ds4::ReplyParser;
using ds4::ToolCallSyntax;
using ds4::ToolParamTypes;

namespace {

const ToolParamTypes kTypes(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
    "properties": {"zip": {"type": "string"}, "n": {"type": "integer"}, "opt": {"anyOf": [{"type": "null"},
    {"type": "string"}]}, "any": {"description": "no type"}}}}}])");

Reply whole(const char* name, const std::string& text, bool opens_thinking, const ToolParamTypes& types = kTypes) {
    ReplyParser p(ds4::think_markers(name), opens_thinking, ds4::tool_call_syntax(name), types);
    p.push(text);
    p.finish();
    return p.reply();
}

struct Streamed {
    std::string reasoning, content;
    std::vector<std::pair<std::string, std::string>> calls;
};

Streamed streamed(const char* name, const std::string& text, size_t cut, bool opens_thinking) {
    ReplyParser p(ds4::think_markers(name), opens_thinking, ds4::tool_call_syntax(name), kTypes);
    Streamed s;
    auto add = [&](const std::vector<ReplyDelta>& ds) {
        for (const ReplyDelta& d : ds) {
            if (d.kind == ReplyDelta::Kind::reasoning) s.reasoning += d.text;
            if (d.kind == ReplyDelta::Kind::content) s.content += d.text;
            if (d.kind == ReplyDelta::Kind::call_start) s.calls.push_back({d.text, ""});
            if (d.kind == ReplyDelta::Kind::call_arguments) s.calls.at(d.call).second += d.text;
        }
    };
    add(p.push(text.substr(0, cut)));
    add(p.push(text.substr(cut)));
    add(p.finish());
    return s;
}

// GLM-4.7 in thinking mode: the prompt opened <think>.
const std::string kReply47 =
    "Look it up.</think>Checking.<tool_call>f<arg_key>zip</arg_key><arg_value>007</arg_value>"
    "<arg_key>n</arg_key><arg_value>42</arg_value><arg_key>opt</arg_key><arg_value>null</arg_value>"
    "<arg_key>any</arg_key><arg_value>[1, \"a\"]</arg_value></tool_call>"
    "<tool_call>g<arg_key>x</arg_key><arg_value>{\"k\": 1.5}</arg_value></tool_call>";

// GLM-4.6 in thinking mode: the model writes its own block first.
const std::string kReply46 =
    "\n<think>Look it up.</think>\nChecking.\n<tool_call>f\n<arg_key>zip</arg_key>\n<arg_value>007</arg_value>\n"
    "<arg_key>n</arg_key>\n<arg_value>42</arg_value>\n<arg_key>opt</arg_key>\n<arg_value>null</arg_value>\n"
    "<arg_key>any</arg_key>\n<arg_value>[1, \"a\"]</arg_value>\n</tool_call>\n"
    "<tool_call>g\n<arg_key>x</arg_key>\n<arg_value>{\"k\": 1.5}</arg_value>\n</tool_call>";

}  // namespace

TEST(ChatGlmToolCalls, ArgumentsAreTypedByTheSchemaElseReadAsJsonWhereTheyParse) {
    for (const auto& [name, text, opens] : {std::tuple{"glm-4.7", kReply47, true}, std::tuple{"glm-4.6", kReply46, false}}) {
        SCOPED_TRACE(name);
        const Reply r = whole(name, text, opens);
        EXPECT_EQ(r.reasoning, "Look it up.");
        EXPECT_EQ(r.content, "Checking.");
        ASSERT_EQ(r.tool_calls.size(), 2u);
        EXPECT_EQ(r.tool_calls[0].name, "f");
        // zip: a string by its schema, though it reads as a number; opt may
        // be a string, so "null" stays text; "any" has no type: JSON.
        EXPECT_EQ(r.tool_calls[0].arguments, R"({"zip": "007", "n": 42, "opt": "null", "any": [1, "a"]})");
        EXPECT_EQ(r.tool_calls[1].name, "g");
        EXPECT_EQ(r.tool_calls[1].arguments, R"({"x": {"k": 1.5}})");
        EXPECT_TRUE(r.tool_calls[0].complete && r.tool_calls[1].complete);
        // The section is every byte after the content, for re-rendering.
        EXPECT_EQ(r.tool_section, text.substr(text.find("Checking.") + 9));
    }
    // Without schemas: JSON where the text parses, else the text.
    const Reply r = whole("glm-4.7", kReply47, true, {});
    EXPECT_EQ(r.tool_calls[0].arguments, R"({"zip": "007", "n": 42, "opt": null, "any": [1, "a"]})");
}

TEST(ChatGlmToolCalls, EveryCutOfAStreamAddsUpToTheWholeReply) {
    for (const auto& [name, text, opens] : {std::tuple{"glm-4.7", kReply47, true}, std::tuple{"glm-4.6", kReply46, false}}) {
        const Reply w = whole(name, text, opens);
        for (size_t cut = 0; cut <= text.size(); ++cut) {
            SCOPED_TRACE(std::string(name) + " cut at " + std::to_string(cut));
            const Streamed s = streamed(name, text, cut, opens);
            EXPECT_EQ(s.reasoning, w.reasoning);
            EXPECT_EQ(s.content, w.content);
            ASSERT_EQ(s.calls.size(), w.tool_calls.size());
            for (size_t i = 0; i < s.calls.size(); ++i) {
                EXPECT_EQ(s.calls[i].first, w.tool_calls[i].name);
                EXPECT_EQ(s.calls[i].second, w.tool_calls[i].arguments);
            }
        }
    }
}

TEST(ChatGlmToolCalls, ACallIsAnnouncedOnceItsNameIsWholeAndItsArgumentsGrowByParameter) {
    ReplyParser p(ds4::think_markers("glm-4.7"), false, ToolCallSyntax::glm47, kTypes);
    auto kinds = [](const std::vector<ReplyDelta>& ds) {
        std::string k;
        for (const ReplyDelta& d : ds) k += std::to_string(int(d.kind)) + ":" + d.text + ";";
        return k;
    };
    EXPECT_EQ(kinds(p.push("Hi<tool_call>f")), "1:Hi;");  // "f" may still grow
    EXPECT_EQ(kinds(p.push("<arg_key>n</arg_key><arg_value>4")), "2:f;");
    EXPECT_EQ(kinds(p.push("2</arg_value>")), "3:{\"n\": 42;");
    EXPECT_EQ(kinds(p.push("</tool_call>")), "3:};");
    EXPECT_EQ(kinds(p.finish()), "");
}

TEST(ChatGlmToolCalls, ACallInsideReasoningIsReasoning) {
    const std::string call = "<tool_call>f<arg_key>n</arg_key><arg_value>1</arg_value></tool_call>";
    const Reply r = whole("glm-4.7", "I could " + call + "</think>No call needed.", true);
    EXPECT_EQ(r.reasoning, "I could " + call);
    EXPECT_EQ(r.content, "No call needed.");
    EXPECT_TRUE(r.tool_calls.empty());
    const Reply r46 = whole("glm-4.6", "\n<think>I could " + call + "</think>\nNo.", false);
    EXPECT_EQ(r46.content, "No.");
    EXPECT_TRUE(r46.tool_calls.empty());
}

TEST(ChatGlmToolCalls, MalformedCallsStayText) {
    const std::vector<std::string> broken = {
        "<tool_call>f<arg_key>n</arg_key><arg_value>1</arg_value>",                      // never closed
        "<tool_call>f stray<arg_key>n</arg_key></tool_call>",                              // key without value
        "<tool_call>f<arg_key>n</arg_key><arg_value>1</arg_value>junk</tool_call>",        // stray text
        "<tool_call><arg_key>n</arg_key><arg_value>1</arg_value></tool_call>",             // no name
        "<tool_call>f<arg_key>n</arg_key><arg_value>1</arg_value><arg_key>n</arg_key>"     // a key twice
        "<arg_value>2</arg_value></tool_call>",
    };
    for (const std::string& b : broken) {
        SCOPED_TRACE(b);
        const Reply r = whole("glm-4.7", "Text " + b, false);
        EXPECT_TRUE(r.tool_calls.empty());
        EXPECT_EQ(r.content, "Text " + b);
        EXPECT_EQ(r.tool_section, "");
    }
    // A good call stands before a broken one, which stays in the section.
    const std::string good = "<tool_call>f<arg_key>n</arg_key><arg_value>1</arg_value></tool_call>";
    const Reply r = whole("glm-4.7", good + broken[2], false);
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_section, good + broken[2]);
    // A call without arguments.
    const Reply bare = whole("glm-4.6", "\n<think></think>\n<tool_call>get_time\n</tool_call>", false);
    ASSERT_EQ(bare.tool_calls.size(), 1u);
    EXPECT_EQ(bare.tool_calls[0].name, "get_time");
    EXPECT_EQ(bare.tool_calls[0].arguments, "{}");
}

TEST(ChatGlmToolCalls, NoThinkAnswersLoseTheLayoutNewlineAndCallsKeepTheirSeparator) {
    // GLM-4.6 no-think: the prompt ends "\n<think></think>", the model
    // writes "\nanswer" (the template renders "\n" + content.strip()).
    Reply r = whole("glm-4.6", "\nHello", false);
    EXPECT_EQ(r.content, "Hello");
    r = whole("glm-4.6", "\n<tool_call>f\n<arg_key>n</arg_key>\n<arg_value>1</arg_value>\n</tool_call>", false);
    EXPECT_EQ(r.content, "");
    // With no content the newline before the call is the section's: the
    // template writes "\n<tool_call>" after the (empty) content.
    EXPECT_EQ(r.tool_section, "\n<tool_call>f\n<arg_key>n</arg_key>\n<arg_value>1</arg_value>\n</tool_call>");
    const std::vector<ds4::ChatMessage> turn = {{"assistant", r.content, r.reasoning, {{"f", "{\"n\": 1}", "c"}}}};
    ds4::ChatOptions o{false, false};
    EXPECT_EQ(ds4::render_chat("glm-4.6", turn, o), "[gMASK]<sop><|assistant|>\n<think></think>" + r.tool_section);
}

TEST(ChatGlmToolCalls, ForcedOpeningsFollowEachSpacing) {
    using ds4::forced_tool_call_opening;
    // GLM-4.7: thinking opened by the prompt is closed first.
    EXPECT_EQ(forced_tool_call_opening(ToolCallSyntax::glm47, "f", true, "</think>"), "</think><tool_call>f");
    EXPECT_EQ(forced_tool_call_opening(ToolCallSyntax::glm47, "", false, "</think>", true), "<tool_call>");
    // GLM-4.6: an empty reasoning block of the reply's own, unless the
    // no-think prompt ends with one; the name then a newline.
    EXPECT_EQ(forced_tool_call_opening(ToolCallSyntax::glm46, "f", false, "</think>"),
              "\n<think></think>\n<tool_call>f\n");
    EXPECT_EQ(forced_tool_call_opening(ToolCallSyntax::glm46, "", false, "</think>", true), "\n<tool_call>");
    // The forced opening plus the model's continuation reads as a call.
    const std::string forced = forced_tool_call_opening(ToolCallSyntax::glm46, "f", false, "</think>");
    const Reply r = whole("glm-4.6", forced + "<arg_key>n</arg_key>\n<arg_value>3</arg_value>\n</tool_call>", false);
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].arguments, "{\"n\": 3}");
    EXPECT_EQ(r.reasoning, "");
    EXPECT_EQ(r.tool_section, "\n<tool_call>f\n<arg_key>n</arg_key>\n<arg_value>3</arg_value>\n</tool_call>");
}

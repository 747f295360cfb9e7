// The tool-call streams ds4-server writes, as the official SDKs read them:
// OpenAIReply, AnthropicReply and ResponsesReply (the server's response
// classes, the same objects its endpoints stream through) turn a reply
// holding tool calls, fed in random pieces, into Server-Sent Events; the
// openai and @anthropic-ai/sdk streaming helpers
// (tests/oracle/server_tool_stream_sdk.mjs) accumulate them into final
// messages, which must equal the server's own non-streamed bodies for the
// same reply: content, reasoning, each call's name and arguments (OpenAI,
// Responses) or input (Anthropic), the finish / stop reason / status. The replies are spelled as the real templates render calls
// (Qwen3, DeepSeek V4 and GLM's two spacings; the renderings themselves are
// checked against the templates in chat_qwen3_tool_roundtrip_test.cpp,
// chat_dsml_roundtrip_test.cpp and chat_glm_tool_roundtrip_test.cpp); no
// model writes them here, since a random-weight model never writes a call.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "server/anthropic_response.h"
#include "server/openai_response.h"
#include "server/responses_response.h"
#include "support/test_seed.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string T = "｜DSML｜";

ds4::GenerateResult result(const std::string& text) {
    ds4::GenerateResult r;
    r.text = text;
    r.reason = ds4::StopReason::end_of_generation;
    r.tokens.assign(9, 1);
    r.prompt_tokens = 40;
    r.cached_tokens = 12;
    return r;
}

// The reply in random pieces through a StreamFormat.
std::string stream(ds4::StreamFormat& f, const std::string& text, std::mt19937_64& rng) {
    std::string sse = f.begin(12);
    for (size_t at = 0; at < text.size();) {
        const size_t n = 1 + rng() % 9;
        sse += f.text(text.substr(at, n));
        at += n;
    }
    return sse + f.end(result(text));
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

json replay(const std::string& openai_sse, const std::string& anthropic_sse, const std::string& responses_sse) {
    const fs::path dir = fs::temp_directory_path() / ("ds4_sdk_replay_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir);
    std::ofstream(dir / "openai.sse", std::ios::binary) << openai_sse;
    std::ofstream(dir / "anthropic.sse", std::ios::binary) << anthropic_sse;
    std::ofstream(dir / "responses.sse", std::ios::binary) << responses_sse;
    const std::string command = "node '" + std::string(DS4_SOURCE_DIR) + "/tests/oracle/server_tool_stream_sdk.mjs' '" +
                                std::string(DS4_DEPS_DIR) + "/npm/node_modules' '" + (dir / "openai.sse").string() +
                                "' '" + (dir / "anthropic.sse").string() + "' '" + (dir / "responses.sse").string() + "' > '" + (dir / "out.json").string() + "'";
    const int status = std::system(command.c_str());
    const std::string out = slurp(dir / "out.json");
    fs::remove_all(dir);
    if (status != 0) throw std::runtime_error("the SDK replay failed (run scripts/setup-npm.sh): " + command);
    return json::parse(out);
}

// `markers` and `types`: the template's (GLM trims a no-think answer and
// types argument values by the offered schemas).
void check(const std::string& reply, ds4::ToolCallSyntax syntax, bool opens_thinking, uint64_t seed,
           const ds4::ThinkMarkers& markers = {"<think>", "</think>"}, const ds4::ToolParamTypes& types = {}) {
    SCOPED_TRACE("reply " + json(reply).dump());
    std::mt19937_64 rng(seed);
    const ds4::OpenAIReply::ToolReading reading{markers, opens_thinking, syntax, nullptr, "", types};
    ds4::OpenAIReply o_stream(true, "chatcmpl-1", "m", true, reading);
    ds4::AnthropicReply a_stream("msg_1", "m", 40, markers, opens_thinking, syntax, nullptr, "", types);
    ds4::ResponsesReplySetup setup;
    setup.id = "resp_1";
    setup.model = "m";
    setup.echo = json::object();
    setup.think = markers;
    setup.opens_thinking = opens_thinking;
    setup.syntax = syntax;
    setup.types = types;
    ds4::ResponsesReply r_stream(setup);
    const std::string o_sse = stream(o_stream, reply, rng);
    const std::string a_sse = stream(a_stream, reply, rng);
    const json got = replay(o_sse, a_sse, stream(r_stream, reply, rng));
    const json r_whole = ds4::ResponsesReply(setup).response(result(reply));
    const json o_whole = ds4::OpenAIReply(true, "chatcmpl-1", "m", false, reading).body(result(reply));
    const json a_whole =
        ds4::AnthropicReply("msg_1", "m", 40, markers, opens_thinking, syntax, nullptr, "", types).message(result(reply));

    // OpenAI: the accumulated message against the whole body, ids aside
    // (each response draws its own).
    const json& om = got["openai"]["choices"][0];
    const json& wm = o_whole["choices"][0];
    EXPECT_EQ(om["finish_reason"], wm["finish_reason"]);
    EXPECT_EQ(om["message"].value("content", json(nullptr)).is_null() ? json("") : om["message"]["content"],
              wm["message"]["content"].is_null() ? json("") : wm["message"]["content"]);
    // (reasoning_content is not compared: the SDK's accumulator knows only
    // OpenAI's own delta fields and keeps the last piece of any other; the
    // pieces are checked in tests/unit/server_tools_test.cpp.)
    const json o_calls = om["message"].value("tool_calls", json::array());
    const json w_calls = wm["message"].value("tool_calls", json::array());
    ASSERT_EQ(o_calls.size(), w_calls.size()) << got["openai"].dump();
    for (size_t i = 0; i < w_calls.size(); ++i) {
        const json& a = o_calls[i];
        const json& b = w_calls[i];
        EXPECT_EQ(a["function"]["name"], b["function"]["name"]);
        EXPECT_EQ(a["function"]["arguments"], b["function"]["arguments"]);
        EXPECT_EQ(a["type"], "function");
        EXPECT_EQ(a["id"].get<std::string>().rfind("call_", 0), 0u);
    }
    // Anthropic: the accumulated content blocks (the SDK parses each
    // tool_use input from its input_json_delta pieces).
    const json& am = got["anthropic"];
    EXPECT_EQ(am["stop_reason"], a_whole["stop_reason"]);
    ASSERT_EQ(am["content"].size(), a_whole["content"].size()) << am.dump();
    for (size_t i = 0; i < am["content"].size(); ++i) {
        json a = am["content"][i], b = a_whole["content"][i];
        EXPECT_EQ(a["type"], b["type"]);
        if (a["type"] == "tool_use") {
            EXPECT_EQ(a["id"].get<std::string>().rfind("toolu_", 0), 0u);
            a.erase("id");
            b.erase("id");
        }
        a.erase("signature");
        b.erase("signature");
        EXPECT_EQ(a, b);
    }
    // Responses: the final response's items and the SDK's own accumulation
    // of each message's text and each call's arguments against the whole
    // response, ids aside.
    const json& rf = got["responses"]["final"];
    EXPECT_EQ(rf["status"], r_whole["status"]);
    ASSERT_EQ(rf["output"].size(), r_whole["output"].size()) << rf.dump();
    for (size_t i = 0; i < rf["output"].size(); ++i) {
        json a = rf["output"][i], b = r_whole["output"][i];
        EXPECT_EQ(a["type"], b["type"]);
        const std::string prefix = a["type"] == "reasoning" ? "rs_" : a["type"] == "message" ? "msg_" : "fc_";
        EXPECT_EQ(a["id"].get<std::string>().rfind(prefix, 0), 0u);
        for (json* x : {&a, &b}) {
            x->erase("id");
            x->erase("call_id");
        }
        // (the SDK's own parse helpers add these)
        a.erase("parsed_arguments");
        if (a.contains("content"))
            for (json& part : a["content"]) part.erase("parsed");
        EXPECT_EQ(a, b);
        const std::string key = std::to_string(i);
        if (b["type"] == "message") EXPECT_EQ(got["responses"]["accumulated"][key], b["content"][0]["text"]);
        if (b["type"] == "function_call") EXPECT_EQ(got["responses"]["accumulated"][key], b["arguments"]);
    }
}

}  // namespace

TEST(ServerToolStreamSdk, Qwen3CallsAccumulateAsTheWholeReply) {
    const uint64_t seed = ds4::test::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with DS4_TEST_SEED)");
    check("<think>\nTwo cities.\n</think>\n\nChecking both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
          "{\"city\": \"Paris\", \"days\": [1, 2], \"opts\": {\"unit\": \"c\", \"note\": \"}{\\\"\"}}}\n</tool_call>\n"
          "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\"}}\n</tool_call>",
          ds4::ToolCallSyntax::qwen3, false, seed);
}

TEST(ServerToolStreamSdk, DeepSeekV4CallsAccumulateAsTheWholeReply) {
    const uint64_t seed = ds4::test::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with DS4_TEST_SEED)");
    check("Need the weather.</think>Checking.\n\n<" + T + "tool_calls>\n<" + T + "invoke name=\"get_weather\">\n<" + T +
              "parameter name=\"city\" string=\"true\">Paris</" + T + "parameter>\n<" + T +
              "parameter name=\"days\" string=\"false\">[1, 2]</" + T + "parameter>\n</" + T + "invoke>\n</" + T +
              "tool_calls>",
          ds4::ToolCallSyntax::dsml, true, seed);
}

// GLM: a zip code the schema says is a string stays "007" and "10001".
const ds4::ToolParamTypes kGlmTypes(
    R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": )"
    R"({"city": {"type": "string"}, "zip": {"type": "string"}, "days": {"type": "array"}}}}}])");

TEST(ServerToolStreamSdk, Glm47CallsAccumulateAsTheWholeReply) {
    const uint64_t seed = ds4::test::test_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    check("Need the weather.</think>Checking.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris"
          "</arg_value><arg_key>zip</arg_key><arg_value>007</arg_value><arg_key>days</arg_key><arg_value>[1, 2]"
          "</arg_value></tool_call><tool_call>get_weather<arg_key>city</arg_key><arg_value>Lyon</arg_value>"
          "<arg_key>zip</arg_key><arg_value>10001</arg_value></tool_call>",
          ds4::ToolCallSyntax::glm47, true, seed, *ds4::think_markers("glm-4.7"), kGlmTypes);
}

TEST(ServerToolStreamSdk, Glm46CallsAccumulateAsTheWholeReply) {
    const uint64_t seed = ds4::test::test_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    check("\n<think>Need the weather.</think>\nChecking.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
          "<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>[1, 2]</arg_value>\n</tool_call>",
          ds4::ToolCallSyntax::glm46, false, seed, *ds4::think_markers("glm-4.6"), kGlmTypes);
}

TEST(ServerToolStreamSdk, AReplyWithoutCallsStaysText) {
    const uint64_t seed = ds4::test::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with DS4_TEST_SEED)");
    // The call inside the reasoning is not a call: no tool_calls, "stop".
    check("<think>\nmaybe <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>\n</think>\n\nNo tool needed.",
          ds4::ToolCallSyntax::qwen3, false, seed);
}

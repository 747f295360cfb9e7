// Renders hundreds of random conversations with ds4's GLM renderers and with
// the real GLM Jinja templates llama.cpp ships (GLM-4.6.jinja,
// GLM-4.7-Flash.jinja) under jinja2 configured like Hugging Face
// transformers (tests/oracle/chat_render_jinja2.py), and compares bytes:
// system turns, multi-turn, tools, tool calls, tool results, inline and
// separate reasoning, thinking on and off, GLM-4.7's clear_thinking. The
// template's own str.strip() is Python's, so the conversations carry
// Unicode whitespace at their edges. llama.cpp's Jinja engine renders the
// same templates in engine_chat_prompt_llama_test.cpp.
//
// Fresh seed every run (DS4_TEST_SEED replays one); one Python process for
// the whole batch.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "chat/chat.h"
#include "chat_glm_random.h"
#include "chat_jinja2_runner.h"
#include "common/error.h"
#include "support/test_seed.h"

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

const fs::path kLlamaTemplates = fs::path(DS4_DEPS_DIR) / "oracle/llama.cpp/models/templates";

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path.string());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string show(const std::string& s) { return nlohmann::json(s).dump(); }

// Whether some earlier assistant turn was rendered with its reasoning (a
// non-empty <think> block right after the marker).
bool kept_reasoning_in(const std::string& prompt) {
    for (const std::string_view open : {"<|assistant|><think>", "<|assistant|>\n<think>"})
        for (size_t at = prompt.find(open); at != std::string::npos; at = prompt.find(open, at + 1)) {
            const size_t body = at + open.size();
            if (body < prompt.size() && prompt.compare(body, 8, "</think>") != 0) return true;
        }
    return false;
}

}  // namespace

TEST(ChatGlmOracle, LlamaCppTemplatesAreRecognisedAndMixturesAreNot) {
    const std::string glm46 = read_file(kLlamaTemplates / "GLM-4.6.jinja");
    const std::string glm47 = read_file(kLlamaTemplates / "GLM-4.7-Flash.jinja");
    EXPECT_EQ(ds4::detect_chat_template(glm46), "glm-4.6");
    EXPECT_EQ(ds4::detect_chat_template(glm47), "glm-4.7");
    // No other template of llama.cpp's collection is taken for GLM.
    int others = 0;
    for (const auto& entry : fs::directory_iterator(kLlamaTemplates)) {
        if (entry.path().extension() != ".jinja") continue;
        const std::string name = entry.path().filename().string();
        if (name == "GLM-4.6.jinja" || name == "GLM-4.7-Flash.jinja") continue;
        ++others;
        EXPECT_EQ(ds4::detect_chat_template(read_file(entry.path())).rfind("glm", 0), std::string::npos) << name;
    }
    EXPECT_GT(others, 20);
    // The 4.6 body with the 4.7 ending, and the reverse, are not guessed at.
    const std::string end46 = glm46.substr(glm46.rfind("{%- if add_generation_prompt -%}"));
    const std::string end47 = glm47.substr(glm47.rfind("{%- if add_generation_prompt -%}"));
    EXPECT_EQ(ds4::detect_chat_template(glm46.substr(0, glm46.size() - end46.size()) + end47), "");
    EXPECT_EQ(ds4::detect_chat_template(glm47.substr(0, glm47.size() - end47.size()) + end46), "");
}

TEST(ChatGlmOracle, RandomConversationsMatchTheRealTemplatesByteForByte) {
    const uint64_t seed = ds4::test::test_seed();
    std::printf("seed %llu (rerun with DS4_TEST_SEED=%llu)\n", static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(seed));
    SCOPED_TRACE(ds4::test::seed_note(seed));
    ds4_test::GlmConversationGenerator gen(seed);

    const std::vector<std::pair<std::string, std::string>> sources = {
        {"glm-4.6", read_file(kLlamaTemplates / "GLM-4.6.jinja")},
        {"glm-4.7", read_file(kLlamaTemplates / "GLM-4.7-Flash.jinja")},
    };
    const int kCases = 600;
    ordered_json cases = ordered_json::array();
    for (int i = 0; i < kCases; ++i) {
        ordered_json c = {{"messages", gen.conversation()},
                          {"add_generation_prompt", gen.chance(0.7)},
                          {"enable_thinking", gen.chance(0.5)}};
        if (gen.chance(0.5)) c["tools"] = gen.tools();  // an empty list now and then: no tools
        if (gen.chance(0.25)) c["template_kwargs"] = {{"clear_thinking", gen.chance(0.5)}};
        cases.push_back(std::move(c));
    }
    std::vector<std::string> templates;
    for (const auto& s : sources) templates.push_back(s.second);
    const nlohmann::json response = ds4_test::render_with_jinja2(templates, cases);
    const nlohmann::json& results = response.at("results");
    ASSERT_EQ(results.size(), templates.size());

    int mismatches = 0, with_tools = 0, with_calls = 0, nothink = 0, kept_reasoning = 0;
    std::map<std::string, int> compared;
    for (size_t t = 0; t < sources.size(); ++t) {
        for (size_t i = 0; i < cases.size(); ++i) {
            const nlohmann::json& expected = results[t][i];
            const ordered_json& c = cases[i];
            ds4::ChatOptions options{c["add_generation_prompt"].get<bool>(), c["enable_thinking"].get<bool>()};
            if (c.contains("tools")) options.tools = c["tools"].dump();
            // clear_thinking = false keeps every turn's reasoning (GLM-4.7);
            // true is what ds4 does by default, as the template does unset.
            if (c.contains("template_kwargs")) options.drop_thinking = c["template_kwargs"]["clear_thinking"].get<bool>();
            const auto messages = ds4_test::to_glm_messages(c["messages"]);
            const std::string context =
                "template " + sources[t].first + ", case " + std::to_string(i) + ": " + c.dump();
            if (expected.is_object()) {
                ADD_FAILURE() << context << "\njinja2 refused it: " << expected["error"];
                continue;
            }
            ++compared[sources[t].first];
            const std::string ours = ds4::render_chat(sources[t].first, messages, options);
            with_tools += ours.find("</tools>") != std::string::npos;
            with_calls += ours.find("<tool_call>") != ours.rfind("<tool_call>");  // beyond the tools' example
            nothink += ours.find("/nothink<|") != std::string::npos;
            kept_reasoning += kept_reasoning_in(ours);
            if (ours != expected.get<std::string>() && ++mismatches <= 5)
                ADD_FAILURE() << context << "\nexpected " << show(expected.get<std::string>()) << "\n     got "
                              << show(ours);
        }
    }
    for (const auto& [renderer, n] : compared) std::printf("%s: %d renderings compared\n", renderer.c_str(), n);
    std::printf("with tools %d, with calls %d, with /nothink %d, with reasoning kept %d\n", with_tools, with_calls,
                nothink, kept_reasoning);
    EXPECT_EQ(mismatches, 0) << "(jinja2 " << response["jinja2"] << ")";
    EXPECT_GT(with_tools, kCases / 2) << "the generator hardly offered tools";
    EXPECT_GT(with_calls, kCases / 2) << "the generator hardly produced tool calls";
    EXPECT_GT(nothink, kCases / 10);
    EXPECT_GT(kept_reasoning, kCases / 10);
    for (const auto& s : sources) EXPECT_EQ(compared[s.first], kCases) << s.first;
}

TEST(ChatGlmOracle, RefusesWhatTheTemplatesCannotRender) {
    // Arguments that are not an object: jinja2 raises for both templates.
    const std::vector<ds4::ChatMessage> bad_args = {
        {"user", "hi", {}},
        {"assistant", "", {}, {{"f", "[1, 2]", "call_1"}}},
    };
    for (const char* name : {"glm-4.6", "glm-4.7"}) {
        EXPECT_THROW(ds4::render_chat(name, bad_args, {}), ds4::Error) << name;
        EXPECT_THROW(ds4::render_chat(name, {{"developer", "x", {}}}, {}), ds4::Error) << name;
        ds4::ChatOptions options;
        options.tools = "{\"not\": \"a list\"}";
        EXPECT_THROW(ds4::render_chat(name, {{"user", "x", {}}}, options), ds4::Error) << name;
    }
    // GLM-4.6 reads `tc.arguments or {}`: no arguments at all is an empty
    // object there (and a call with its name alone).
    const std::vector<ds4::ChatMessage> no_args = {{"assistant", "", {}, {{"f", "", "call_1"}}}};
    EXPECT_EQ(ds4::render_chat("glm-4.6", no_args, {false, true}),
              "[gMASK]<sop><|assistant|>\n<think></think>\n<tool_call>f\n</tool_call>");
    EXPECT_THROW(ds4::render_chat("glm-4.7", no_args, {false, true}), ds4::Error);
}

// Qwen3 tool-call round trip against the real template: jinja2 (configured
// like Hugging Face transformers, tests/oracle/chat_render_jinja2.py) renders
// random assistant turns with reasoning, text and tool calls whose arguments
// are objects (printed with tojson, the spelling the model was trained on);
// what follows the turn's opening is what the model would have sampled.
// ds4's reply parser must read back the reasoning, the content and each
// call's name and arguments (as the exact text the template printed), whole
// and streamed in random pieces; and the turn re-rendered from the parsed
// parts must be the template's bytes again, with the sampled section put
// back (ChatMessage::sampled_tool_calls) and without it.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "chat/chat.h"
#include "chat/python_json.h"
#include "chat/reply_parser.h"
#include "chat_jinja2_runner.h"
#include "support/test_seed.h"

using nlohmann::json;

namespace {

const std::filesystem::path kTemplate =
    std::filesystem::path(DS4_DEPS_DIR) / "oracle/llama.cpp/models/templates/Qwen-Qwen3-0.6B.jinja";

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

class Gen {
public:
    explicit Gen(uint64_t seed) : rng_(seed) {}
    int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
    bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }

    // Text without the markup a reply cannot carry unambiguously (think
    // and tool-call tags), with the whitespace and Unicode that matter.
    std::string text(int max_pieces) {
        static const std::vector<std::string> pieces = {"hello", " world", "\n", "  ", "\t", "'", "\"", "\\",
                                                        "é", "中文", "🙂", "{", "}", "[1]", "null", "<", ">", "x"};
        std::string out;
        for (int n = uniform(0, max_pieces); n > 0; --n) out += pieces[uniform(0, int(pieces.size()) - 1)];
        // Trailing or leading whitespace belongs to the section / the
        // template's strips, not to the parts compared here.
        while (!out.empty() && (out.back() == ' ' || out.back() == '\n' || out.back() == '\t')) out.pop_back();
        while (!out.empty() && (out.front() == ' ' || out.front() == '\n' || out.front() == '\t')) out.erase(0, 1);
        return out;
    }
    std::string name() {
        static const std::vector<std::string> words = {"get_weather", "search", "ns.fn", "x-1", "Ünïcode", "名前"};
        return words[uniform(0, int(words.size()) - 1)];
    }
    json value(int depth) {
        switch (uniform(0, depth > 2 ? 3 : 5)) {
            case 0: return text(3);
            case 1: return uniform(-100000, 100000);
            case 2: return chance(0.5);
            case 3: return nullptr;
            case 4: {
                json a = json::array();
                for (int i = uniform(0, 3); i > 0; --i) a.push_back(value(depth + 1));
                return a;
            }
            default: {
                json o = json::object();
                for (int i = uniform(0, 3); i > 0; --i) o[name() + std::to_string(i)] = value(depth + 1);
                return o;
            }
        }
    }

private:
    std::mt19937_64 rng_;
};

}  // namespace

TEST(ChatQwen3ToolRoundTrip, TemplateRenderedCallsParseBackAndReRenderByteForByte) {
    const uint64_t seed = ds4::test::test_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with DS4_TEST_SEED)");
    Gen gen(seed);
    const int kCases = 300;
    json cases = json::array();
    std::vector<json> assistants;
    for (int i = 0; i < kCases; ++i) {
        json a = {{"role", "assistant"}, {"content", gen.chance(0.3) ? "" : gen.text(5)}};
        if (gen.chance(0.6)) a["reasoning_content"] = gen.text(5);
        json calls = json::array();
        for (int k = gen.uniform(1, 3); k > 0; --k) {
            json args = json::object();
            for (int n = gen.uniform(0, 4); n > 0; --n) args[gen.name() + std::to_string(n)] = gen.value(1);
            calls.push_back({{"id", "call_" + std::to_string(k)}, {"type", "function"},
                             {"function", {{"name", gen.name()}, {"arguments", args}}}});
        }
        a["tool_calls"] = calls;
        // The turn after the last query keeps its reasoning, as a tool-calling step does.
        json messages = json::array({{{"role", "user"}, {"content", "q"}}, a, {{"role", "tool"}, {"content", "r"}}});
        cases.push_back({{"messages", messages}, {"add_generation_prompt", false}, {"enable_thinking", true}});
        assistants.push_back(a);
    }
    const json response = ds4_test::render_with_jinja2({read_file(kTemplate)}, cases);
    const json& results = response.at("results").at(0);
    ASSERT_EQ(results.size(), cases.size());

    const std::string open = "<|im_start|>assistant\n", close = "<|im_end|>\n<|im_start|>user";
    int failures = 0, calls_seen = 0;
    std::mt19937_64 rng(seed);
    for (size_t i = 0; i < cases.size() && failures < 5; ++i) {
        ASSERT_TRUE(results[i].is_string()) << results[i].dump();
        const std::string rendered = results[i].get<std::string>();
        const size_t from = rendered.find(open) + open.size();
        const std::string sampled = rendered.substr(from, rendered.find(close, from) - from);
        const json& a = assistants[i];
        const std::string context = "case " + std::to_string(i) + ": " + json(sampled).dump();

        // Whole, then in random pieces.
        ds4::ReplyParser whole({{"<think>", "</think>"}}, false, ds4::ToolCallSyntax::qwen3);
        whole.push(sampled);
        whole.finish();
        const ds4::Reply& r = whole.reply();
        ds4::ReplyParser streamed({{"<think>", "</think>"}}, false, ds4::ToolCallSyntax::qwen3);
        std::string streamed_args;
        for (size_t at = 0; at < sampled.size();) {
            const size_t n = 1 + rng() % 7;
            for (const auto& d : streamed.push(sampled.substr(at, n)))
                if (d.kind == ds4::ReplyDelta::Kind::call_arguments) streamed_args += d.text;
            at += n;
        }
        for (const auto& d : streamed.finish())
            if (d.kind == ds4::ReplyDelta::Kind::call_arguments) streamed_args += d.text;

        bool ok = r.reasoning == a.value("reasoning_content", "") && r.content == a["content"].get<std::string>() &&
                  r.tool_calls.size() == a["tool_calls"].size();
        std::string all_args;
        for (size_t k = 0; ok && k < r.tool_calls.size(); ++k) {
            const json& fn = a["tool_calls"][k]["function"];
            ok = r.tool_calls[k].complete && r.tool_calls[k].name == fn["name"].get<std::string>() &&
                 r.tool_calls[k].arguments == ds4::python_json_dumps(nlohmann::ordered_json(fn["arguments"]));
            all_args += r.tool_calls[k].arguments;
        }
        ok = ok && streamed.reply().content == r.content && streamed.reply().tool_section == r.tool_section &&
             streamed_args == all_args;
        calls_seen += int(r.tool_calls.size());

        // Re-rendered by ds4 from the parsed parts, as a client sends them
        // back: the same bytes, with the sampled section and without.
        ds4::ChatMessage back{"assistant", r.content, r.reasoning};
        for (size_t k = 0; k < r.tool_calls.size(); ++k)
            back.tool_calls.push_back({r.tool_calls[k].name, r.tool_calls[k].arguments, "call_" + std::to_string(k)});
        std::vector<ds4::ChatMessage> chat = {{"user", "q", {}}, back, {"tool", "r", {}}};
        ds4::ChatOptions o;
        o.add_generation_prompt = false;
        const std::string again = ds4::render_qwen3(chat, o);
        chat[1].sampled_tool_calls = r.tool_section;
        const std::string exact = ds4::render_qwen3(chat, o);
        ok = ok && again == rendered && exact == rendered;
        if (!ok) {
            ++failures;
            ADD_FAILURE() << context << "\nreasoning " << json(r.reasoning).dump() << "\ncontent "
                          << json(r.content).dump() << "\nsection " << json(r.tool_section).dump() << "\nstreamed args "
                          << json(streamed_args).dump() << "\nre-rendered " << json(again).dump() << "\nexpected "
                          << json(rendered).dump();
        }
    }
    EXPECT_EQ(failures, 0);
    EXPECT_GT(calls_seen, kCases);
}

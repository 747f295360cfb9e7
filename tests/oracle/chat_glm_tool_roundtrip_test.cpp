// GLM tool-call round trip against the real templates (GLM-4.6.jinja and
// GLM-4.7-Flash.jinja from llama.cpp, rendered by jinja2 configured like
// Hugging Face transformers): random assistant turns with reasoning, text
// and tool calls whose arguments are objects (strings printed as they are,
// other values as JSON); what follows the prompt's end for that turn is
// what the model would have sampled, in thinking mode and (where the
// template can show it) no-think mode. ds4's reply parser must read back
// the reasoning, the content and each call's name and typed arguments, with
// the request's tool schemas and, where no string looks like JSON, without
// them; whole and streamed in random pieces (the streamed argument deltas
// adding up to the whole arguments); and the turn re-rendered from the
// parsed parts must be the template's bytes again, with the sampled section
// put back (ChatMessage::sampled_tool_calls) and without it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "chat/chat.h"
#include "chat/python_json.h"
#include "chat/reply_parser.h"
#include "chat_jinja2_runner.h"
#include "support/test_seed.h"

using nlohmann::ordered_json;

namespace {

const std::filesystem::path kTemplates = std::filesystem::path(DS4_DEPS_DIR) / "oracle/llama.cpp/models/templates";

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
    std::string pick(const std::vector<std::string>& v) { return v[size_t(uniform(0, int(v.size()) - 1))]; }

    // Pieces a reply can carry unambiguously (no think or call tags), JSON
    // look-alikes among them.
    std::string raw(int max_pieces) {
        static const std::vector<std::string> pieces = {"hello", " world", "\n", "  ", "\t", "'", "\"", "\\", "é",
                                                        "中文", "🙂", "{", "}", "[1]", "null", "<", ">", "x", "42",
                                                        "true", "-3.5", "\u3000"};
        std::string out;
        for (int n = uniform(0, max_pieces); n > 0; --n) out += pick(pieces);
        return out;
    }
    // Text as the templates print reasoning and content: stripped.
    std::string text(int max_pieces) {
        std::string out = raw(max_pieces);
        auto space_at = [&](bool front) {
            static const std::vector<std::string> spaces = {" ", "\n", "\t", "\u3000"};
            for (const std::string& s : spaces)
                if (front ? out.starts_with(s) : out.ends_with(s)) return s.size();
            return size_t(0);
        };
        while (size_t n = space_at(false)) out.erase(out.size() - n);
        while (size_t n = space_at(true)) out.erase(0, n);
        return out;
    }
    std::string name() { return pick({"get_weather", "search", "ns.fn", "x-1", "Ünïcode", "名前"}); }
    ordered_json value(int depth) {
        switch (uniform(0, depth > 1 ? 4 : 6)) {
            case 0:
            case 1: return raw(4);  // strings, spaces and JSON look-alikes kept as written
            case 2: return uniform(-100000, 100000);
            case 3: return chance(0.5);
            case 4: return nullptr;
            case 5: {
                ordered_json a = ordered_json::array();
                for (int i = uniform(0, 3); i > 0; --i) a.push_back(value(depth + 1));
                return a;
            }
            default: {
                ordered_json o = ordered_json::object();
                for (int i = uniform(0, 3); i > 0; --i) o[name() + std::to_string(i)] = value(depth + 1);
                return o;
            }
        }
    }

private:
    std::mt19937_64 rng_;
};

// JSON Schema's name for a value's type.
std::string schema_type(const ordered_json& v) {
    if (v.is_string()) return "string";
    if (v.is_boolean()) return "boolean";
    if (v.is_null()) return "null";
    if (v.is_number_integer()) return "integer";
    if (v.is_array()) return "array";
    return "object";
}

// Whether some string argument would read back as JSON without a schema.
bool has_json_lookalike(const ordered_json& calls) {
    for (const auto& c : calls)
        for (const auto& [k, v] : c["function"]["arguments"].items())
            if (v.is_string() && !ordered_json::parse(v.get<std::string>(), nullptr, false).is_discarded()) return true;
    return false;
}

struct Parsed {
    ds4::Reply reply;
    std::string streamed_args;
};

Parsed parse(const std::string& name, bool opens_thinking, const ds4::ToolParamTypes& types, const std::string& sampled,
             std::mt19937_64& rng) {
    const ds4::ToolCallSyntax syntax = ds4::tool_call_syntax(name);
    ds4::ReplyParser whole(ds4::think_markers(name), opens_thinking, syntax, types);
    whole.push(sampled);
    whole.finish();
    ds4::ReplyParser streamed(ds4::think_markers(name), opens_thinking, syntax, types);
    Parsed p;
    auto take = [&](const std::vector<ds4::ReplyDelta>& ds) {
        for (const auto& d : ds)
            if (d.kind == ds4::ReplyDelta::Kind::call_arguments) p.streamed_args += d.text;
    };
    for (size_t at = 0; at < sampled.size();) {
        const size_t n = 1 + rng() % 9;
        take(streamed.push(sampled.substr(at, n)));
        at += n;
    }
    take(streamed.finish());
    p.reply = whole.reply();
    const ds4::Reply& s = streamed.reply();
    if (s.content != p.reply.content || s.reasoning != p.reply.reasoning || s.tool_section != p.reply.tool_section)
        p.streamed_args = "(streamed reply differs)";
    return p;
}

}  // namespace

TEST(ChatGlmToolRoundTrip, TemplateRenderedCallsParseBackAndReRenderByteForByte) {
    const uint64_t seed = ds4::test::test_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    Gen gen(seed);
    const int kCases = 300;
    ordered_json cases = ordered_json::array();
    std::vector<ordered_json> assistants, specs;
    std::vector<bool> thinking;
    for (int i = 0; i < kCases; ++i) {
        ordered_json a = {{"role", "assistant"}, {"content", gen.chance(0.3) ? "" : gen.text(5)}};
        if (gen.chance(0.6)) a["reasoning_content"] = gen.text(5);
        ordered_json calls = ordered_json::array(), tools = ordered_json::array();
        for (int k = gen.uniform(1, 3); k > 0; --k) {
            ordered_json args = ordered_json::object(), props = ordered_json::object();
            for (int n = gen.uniform(0, 4); n > 0; --n) {
                const std::string key = gen.name() + std::to_string(n);
                args[key] = gen.value(1);
                props[key] = {{"type", schema_type(args[key])}};
            }
            const std::string fn = gen.name() + "_" + std::to_string(k);
            calls.push_back({{"id", "call_" + std::to_string(k)}, {"type", "function"},
                             {"function", {{"name", fn}, {"arguments", args}}}});
            tools.push_back({{"type", "function"},
                             {"function", {{"name", fn}, {"parameters", {{"type", "object"}, {"properties", props}}}}}});
        }
        a["tool_calls"] = calls;
        // After the last user message, as a tool-calling step is: its
        // reasoning is rendered. Rendered without tools (the turn's bytes
        // are what matters); the specs go to the parser.
        ordered_json messages = ordered_json::array(
            {{{"role", "user"}, {"content", "q"}}, a, {{"role", "tool"}, {"content", "r"}}});
        cases.push_back({{"messages", messages}, {"add_generation_prompt", false}, {"enable_thinking", true}});
        assistants.push_back(a);
        specs.push_back(tools);
        thinking.push_back(gen.chance(0.5));
    }
    const std::vector<std::string> names = {"glm-4.6", "glm-4.7"};
    const nlohmann::json response = ds4_test::render_with_jinja2(
        {read_file(kTemplates / "GLM-4.6.jinja"), read_file(kTemplates / "GLM-4.7-Flash.jinja")}, cases);

    int failures = 0, calls_seen = 0, no_think_cases = 0, without_schema = 0;
    std::mt19937_64 rng(seed);
    for (size_t t = 0; t < names.size(); ++t) {
        const std::string& name = names[t];
        const nlohmann::json& results = response.at("results").at(t);
        ASSERT_EQ(results.size(), cases.size());
        for (size_t i = 0; i < cases.size() && failures < 5; ++i) {
            ASSERT_TRUE(results[i].is_string()) << results[i].dump();
            const std::string rendered = results[i].get<std::string>();
            const ordered_json& a = assistants[i];
            const bool has_reasoning = !a.value("reasoning_content", "").empty();
            // Where the prompt ended for this turn: GLM-4.6 after
            // <|assistant|> in thinking mode, after the pre-filled
            // "\n<think></think>" in no-think mode (only a turn without
            // reasoning); GLM-4.7 after "<think>" with reasoning, after
            // "</think>" (no-think) without.
            std::string opening = "<|assistant|>";
            bool opens_thinking = false;
            if (name == "glm-4.6" && !has_reasoning && !thinking[i]) opening += "\n<think></think>";
            if (name == "glm-4.7") {
                opening += has_reasoning ? "<think>" : "</think>";
                opens_thinking = has_reasoning;
            }
            no_think_cases += opening.ends_with("</think>");
            const size_t from = rendered.find(opening) + opening.size();
            const std::string sampled = rendered.substr(from, rendered.find("<|observation|>", from) - from);
            const std::string context = name + " case " + std::to_string(i) + ": " + nlohmann::json(sampled).dump();

            std::string expected_args;
            for (const auto& c : a["tool_calls"]) expected_args += ds4::python_json_dumps(c["function"]["arguments"]);
            auto check = [&](const Parsed& p) {
                const ds4::Reply& r = p.reply;
                bool ok = r.reasoning == a.value("reasoning_content", "") &&
                          r.content == a["content"].get<std::string>() && r.tool_calls.size() == a["tool_calls"].size();
                std::string all_args;
                for (size_t k = 0; ok && k < r.tool_calls.size(); ++k) {
                    ok = r.tool_calls[k].complete &&
                         r.tool_calls[k].name == a["tool_calls"][k]["function"]["name"].get<std::string>();
                    all_args += r.tool_calls[k].arguments;
                }
                return ok && all_args == expected_args && p.streamed_args == all_args;
            };
            const Parsed typed = parse(name, opens_thinking, ds4::ToolParamTypes(specs[i].dump()), sampled, rng);
            bool ok = check(typed);
            if (!has_json_lookalike(a["tool_calls"])) {
                ++without_schema;
                ok = ok && check(parse(name, opens_thinking, {}, sampled, rng));
            }
            const ds4::Reply& r = typed.reply;
            calls_seen += int(r.tool_calls.size());

            // Re-rendered by ds4 from the parsed parts, as a client sends
            // them back: the same bytes, with the sampled section and without.
            ds4::ChatMessage back{"assistant", r.content, r.reasoning};
            for (size_t k = 0; k < r.tool_calls.size(); ++k)
                back.tool_calls.push_back({r.tool_calls[k].name, r.tool_calls[k].arguments, "call_" + std::to_string(k)});
            std::vector<ds4::ChatMessage> chat = {{"user", "q", {}}, back, {"tool", "r", {}}};
            ds4::ChatOptions o;
            o.add_generation_prompt = false;
            const std::string again = ds4::render_chat(name, chat, o);
            chat[1].sampled_tool_calls = r.tool_section;
            const std::string exact = ds4::render_chat(name, chat, o);
            ok = ok && again == rendered && exact == rendered;
            if (!ok && ++failures <= 5)
                ADD_FAILURE() << context << "\nreasoning " << nlohmann::json(r.reasoning).dump() << "\ncontent "
                              << nlohmann::json(r.content).dump() << "\nsection " << nlohmann::json(r.tool_section).dump()
                              << "\nstreamed args " << nlohmann::json(typed.streamed_args).dump() << "\nexpected args "
                              << nlohmann::json(expected_args).dump() << "\nre-rendered "
                              << nlohmann::json(again).dump() << "\nexpected " << nlohmann::json(rendered).dump();
        }
    }
    std::printf("calls %d, no-think turns %d, parsed without schemas %d\n", calls_seen, no_think_cases, without_schema);
    EXPECT_EQ(failures, 0);
    EXPECT_GT(calls_seen, kCases);
    EXPECT_GT(no_think_cases, kCases / 4);
    EXPECT_GT(without_schema, kCases / 4);
}

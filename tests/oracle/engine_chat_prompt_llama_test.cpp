// A chat prompt end to end, against llama.cpp: for the same conversation,
// chat template and vocabulary (a synthesized model file carrying the real
// tokenizer and template), the token ids ds4 feeds the model (the ds4
// program's own path: choose_chat_template on the file, render_chat,
// prompt_token_ids with BOS) equal the ids llama.cpp builds itself: its Jinja
// engine on the file's tokenizer.chat_template (common_chat_templates_apply,
// as llama-server does), then llama_tokenize(add_special=true,
// parse_special=true). tests/oracle_tools/common/llama_chat_tokens.cpp is
// llama.cpp's side.
//
// Three checks per conversation: the rendered text is the same bytes;
// llama.cpp tokenizes ds4's text to ds4's ids (tokenizer and BOS alone); and
// the two ids agree. Where libllama's built-in, non-Jinja renderer
// (llama_chat_apply_template) claims the template, it is a third opinion:
// for the Qwen3 templates it is plain ChatML, which is what the hybrid
// template renders with thinking on and the Instruct-2507 one always, for
// conversations that end with a user message. For the DeepSeek V4 templates
// it picks its DeepSeek V3 renderer (the V4 source has V3's role markers),
// which writes no <think> / </think> after <｜Assistant｜>: it agrees with
// neither ds4 nor llama.cpp's Jinja engine there, so it is not compared;
// for the GLM templates it picks its GLM-4 renderer, which predates them.
// The GLM templates strip content with Python's str.strip(), which ds4
// follows and llama.cpp's engine spells as an ASCII strip: their
// conversations keep non-ASCII whitespace off the edges of the text
// (chat_glm_test.cpp checks those edges against jinja2).
//
// Conversations are random (fresh seed each run, DS4_TEST_SEED replays):
// system or not, one to three turns, reasoning on earlier assistant turns,
// thinking on or off, DeepSeek's reasoning efforts; text with newlines,
// spaces, punctuation, CJK, emoji and a chat marker now and then; half of
// them offer tools (OpenAI specs, which llama.cpp gets as its own tool
// structs), and their earlier turns may be tool-calling steps (assistant
// tool calls, then one tool result each).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "chat/chat.h"
#include "chat/python_json.h"
#include "gguf/gguf_file.h"
#include "oracle_harness.h"
#include "engine/chat_prompt.h"
#include "tokenizer/tokenizer.h"

namespace ds4::oracle {
namespace {

using nlohmann::json;

const fs::path kLlamaTemplates = fs::path(DS4_ORACLE_DIR) / "llama.cpp/models/templates";
const fs::path kFixtureTemplates = fs::path(DS4_SOURCE_DIR) / "tests/fixtures/chat_templates";

class RandomChat {
public:
    explicit RandomChat(uint64_t seed) : rng_(seed) {}

    int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
    bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
    bool ascii_edges = false;  // no U+00A0 at the start or end of a text (see above)

    std::string text() {
        static const std::vector<std::string> pieces = {
            "Hello", " world", " the", " answer", " is", " 42", ".", ",", "?", "!", "\n", "\n\n", "  ", "\t",
            " café", " naïve", " 中文", "日本語", " 한국어", " 🙂", " 👩‍💻", " Привет", " مرحبا", " x²", " -> ",
            " `code`", " {\"a\": 1}", " <b>", "'", "\"", " 3.14159", " e.g.", "\u00a0", " ...", " <|im_end|>",
        };
        std::string out;
        const int n = uniform(1, 12);
        for (int i = 0; i < n; ++i) out += pieces[size_t(uniform(0, int(pieces.size()) - 1))];
        if (ascii_edges) drop_nbsp_edges(out);
        return out;
    }

    // The leading and trailing whitespace runs go where they hold a U+00A0
    // (which an ASCII strip stops at).
    static void drop_nbsp_edges(std::string& s) {
        const std::string nbsp = "\u00a0";
        auto space_at = [&](size_t i) -> size_t {  // the length of the whitespace character at i, or 0
            if (s.compare(i, nbsp.size(), nbsp) == 0) return nbsp.size();
            return std::string_view(" \t\n\r\v\f").find(s[i]) != std::string_view::npos ? 1 : 0;
        };
        size_t lead = 0;
        while (lead < s.size() && space_at(lead) > 0) lead += space_at(lead);
        if (s.substr(0, lead).find(nbsp) != std::string::npos) s.erase(0, lead);
        size_t tail = s.size();
        while (tail > 0) {
            const size_t back = tail >= 2 && s.compare(tail - 2, 2, nbsp) == 0 ? 2 : 1;
            if (space_at(tail - back) != back) break;
            tail -= back;
        }
        if (s.substr(tail).find(nbsp) != std::string::npos) s.erase(tail);
    }

    // Tool specs as OpenAI clients send them; names and keys are plain
    // identifiers, descriptions random text.
    json tools() {
        static const std::vector<std::string> names = {"get_weather", "search", "read_file", "run"};
        json list = json::array();
        for (int i = uniform(1, 3); i > 0; --i) {
            json props = json::object();
            for (int k = uniform(0, 2); k >= 0; --k)
                props["arg" + std::to_string(k)] = {{"type", chance(0.5) ? "string" : "integer"}, {"description", text()}};
            list.push_back({{"type", "function"},
                            {"function", {{"name", names[size_t(i)]}, {"description", text()},
                                          {"parameters", {{"type", "object"}, {"properties", props}}}}}});
        }
        return list;
    }

    // Calls with arguments in Python's JSON spelling (what the templates
    // print for an arguments object, which llama.cpp hands them).
    json tool_calls() {
        json calls = json::array();
        for (int i = uniform(1, 2); i > 0; --i) {
            nlohmann::ordered_json args = nlohmann::ordered_json::object();
            args["city"] = text();
            if (chance(0.5)) args["days"] = uniform(1, 9);
            calls.push_back({{"id", "call_" + std::to_string(uniform(0, 99999))},
                             {"type", "function"},
                             {"function", {{"name", "get_weather"}, {"arguments", python_json_dumps(args)}}}});
        }
        return calls;
    }

    json conversation(bool with_tools) {
        json messages = json::array();
        if (chance(0.5)) messages.push_back({{"role", "system"}, {"content", text()}});
        const int turns = uniform(1, 3);
        for (int t = 0; t < turns; ++t) {
            messages.push_back({{"role", "user"}, {"content", text()}});
            if (t + 1 == turns) break;
            json a = {{"role", "assistant"}, {"content", text()}};
            if (chance(0.4)) a["reasoning_content"] = text();
            if (with_tools && chance(0.6)) {
                // A tool-calling step: the calls, then each result.
                a["tool_calls"] = tool_calls();
                messages.push_back(a);
                for (const json& c : a["tool_calls"])
                    messages.push_back({{"role", "tool"}, {"tool_call_id", c["id"]}, {"content", text()}});
                a = {{"role", "assistant"}, {"content", text()}};
            }
            messages.push_back(a);
        }
        return messages;
    }

private:
    std::mt19937_64 rng_;
};

// One model file and what its conversations are rendered with.
struct ChatModel {
    std::string label;
    fs::path path;
    std::string expected_template;              // what ds4 must detect in the file
    std::vector<std::string> efforts = {""};    // reasoning_effort values to draw from
    bool chatml_when_thinking = false;          // the built-in ChatML renderer agrees when thinking is on
    bool chatml_always = false;                 // ... whatever the thinking switch
    bool ascii_edges = false;                   // RandomChat::ascii_edges
};

std::vector<ChatMessage> to_messages(const json& messages) {
    std::vector<ChatMessage> out;
    for (const json& m : messages) {
        ChatMessage msg{m.at("role").get<std::string>(), m.at("content").get<std::string>(), std::nullopt};
        if (m.contains("reasoning_content")) msg.reasoning_content = m["reasoning_content"].get<std::string>();
        if (m.contains("tool_calls")) {
            for (const json& c : m["tool_calls"])
                msg.tool_calls.push_back({c["function"]["name"].get<std::string>(),
                                          c["function"]["arguments"].get<std::string>(), c["id"].get<std::string>()});
        }
        out.push_back(std::move(msg));
    }
    return out;
}

std::string show_difference(const std::string& ours, const std::string& theirs) {
    size_t i = 0;
    while (i < ours.size() && i < theirs.size() && ours[i] == theirs[i]) ++i;
    const size_t from = i < 40 ? 0 : i - 40;
    return "first difference at byte " + std::to_string(i) + ":\n  ds4:       " + json(ours.substr(from, 120)).dump() +
           "\n  llama.cpp: " + json(theirs.substr(from, 120)).dump();
}

class ChatPromptVsLlama : public ::testing::Test {
protected:
    void SetUp() override {
        seed_ = fresh_seed();
        std::printf("seed %llu (rerun with DS4_TEST_SEED=%llu)\n", static_cast<unsigned long long>(seed_),
                    static_cast<unsigned long long>(seed_));
    }

    fs::path synth(const std::string& arch, const std::string& name, const std::vector<std::string>& extra = {}) {
        const fs::path out = dir_ / name;
        std::vector<std::string> argv = {ds4_program("ds4-gguf").string(), "synth", "--arch", arch, "--preset", "tiny",
                                         "--seed", std::to_string(model_seed(seed_)), "--out", out.string()};
        argv.insert(argv.end(), extra.begin(), extra.end());
        run_checked(argv);
        return out;
    }

    fs::path with_template(const fs::path& in, const fs::path& jinja, const std::string& name) {
        const fs::path out = dir_ / name;
        run_checked({oracle_tool("llama_set_chat_template").string(), in.string(), out.string(), "--template",
                     jinja.string()});
        return out;
    }

    // Renders `n` random conversations with ds4 and llama.cpp and compares.
    void compare(const ChatModel& model, int n) {
        SCOPED_TRACE(model.label + ", seed " + std::to_string(seed_));
        const auto file = GgufFile::open(model.path.string());
        const ChatTemplateChoice choice = choose_chat_template(*file, "");
        ASSERT_EQ(choice.name, model.expected_template);
        EXPECT_EQ(choice.warning, "");
        const auto tokenizer = Tokenizer::from_gguf(*file);

        RandomChat gen(seed_ ^ std::hash<std::string>{}(model.label));
        gen.ascii_edges = model.ascii_edges;
        json cases = json::array();
        std::vector<std::vector<int32_t>> ours_ids;
        for (int i = 0; i < n; ++i) {
            const bool with_tools = gen.chance(0.5);
            json c = {{"messages", gen.conversation(with_tools)}, {"add_generation_prompt", true},
                      {"enable_thinking", gen.chance(0.5)}};
            if (with_tools) c["tools"] = gen.tools();
            const std::string effort = model.efforts[size_t(gen.uniform(0, int(model.efforts.size()) - 1))];
            if (!effort.empty()) c["reasoning_effort"] = effort;
            // As tools/ds4/generate.cpp sets them (--nothink, --think-max),
            // plus the "high" effort only the Flash-0731 template knows.
            ChatOptions options;
            options.enable_thinking = c["enable_thinking"].get<bool>();
            options.reasoning_effort = effort;
            if (with_tools) {
                // In the key order llama.cpp builds its tool objects in.
                nlohmann::ordered_json specs = nlohmann::ordered_json::array();
                for (const json& t : c["tools"]) {
                    nlohmann::ordered_json f;
                    f["name"] = t["function"]["name"];
                    f["description"] = t["function"]["description"];
                    f["parameters"] = t["function"]["parameters"];
                    specs.push_back({{"type", "function"}, {"function", f}});
                }
                options.tools = specs.dump();
            }
            const std::string text = render_chat(choice.name, to_messages(c["messages"]), options);
            c["text"] = text;
            ours_ids.push_back(prompt_token_ids(*tokenizer, text));
            cases.push_back(std::move(c));
        }
        const fs::path request = dir_ / (model.label + ".request.json");
        const fs::path response = dir_ / (model.label + ".response.json");
        std::ofstream(request) << json{{"cases", cases}}.dump();
        run_checked({oracle_tool("llama_chat_tokens").string(), model.path.string(), request.string(),
                     response.string()});
        std::ifstream in(response);
        const json results = json::parse(in).at("cases");
        ASSERT_EQ(results.size(), cases.size());

        int text_equal = 0, ids_equal = 0, tokenization_equal = 0, builtin_compared = 0, failures = 0;
        int with_tools = 0, with_tool_calls = 0;
        for (size_t i = 0; i < cases.size(); ++i) {
            const json& c = cases[i];
            const json& r = results[i];
            const std::string& text = c["text"].get_ref<const std::string&>();
            with_tools += c.contains("tools");
            with_tool_calls += text.find("<tool_call>\n{\"name\": \"get_weather") != std::string::npos ||
                               text.find("invoke name=\"get_weather\">") != std::string::npos ||
                               text.find("<tool_call>get_weather") != std::string::npos;
            const std::string where = "case " + std::to_string(i) + ": " + c.dump();
            auto report = [&](const std::string& what) {
                if (++failures <= 5) ADD_FAILURE() << what << "\n" << where;
            };
            // Tokenizer and BOS alone: llama.cpp's ids for ds4's own text.
            if (r.at("text_ids").get<std::vector<int32_t>>() == ours_ids[i]) ++tokenization_equal;
            else report("llama_tokenize(ds4's text) = " + r["text_ids"].dump() + "\n ds4's ids = " + json(ours_ids[i]).dump());
            // The whole path: llama.cpp's Jinja rendering, tokenized by llama.cpp.
            const json& jinja = r.at("jinja");
            if (jinja.contains("error")) {
                report("llama.cpp's Jinja engine failed: " + jinja["error"].get<std::string>());
                continue;
            }
            const std::string& theirs = jinja["prompt"].get_ref<const std::string&>();
            if (theirs == text) ++text_equal;
            else report("rendering differs, " + show_difference(text, theirs));
            if (jinja["ids"].get<std::vector<int32_t>>() == ours_ids[i]) ++ids_equal;
            else report("ids differ:\n  ds4:       " + json(ours_ids[i]).dump() + "\n  llama.cpp: " + jinja["ids"].dump());
            // libllama's built-in renderer, where it is plain ChatML and the
            // template reduces to ChatML.
            const bool thinking = c["enable_thinking"].get<bool>();
            if (!c.contains("tools") && (model.chatml_always || (model.chatml_when_thinking && thinking))) {
                const json& builtin = r.at("builtin");
                ++builtin_compared;
                if (builtin.contains("error")) report("built-in renderer failed: " + builtin["error"].get<std::string>());
                else if (builtin["prompt"].get<std::string>() != text)
                    report("built-in ChatML differs, " + show_difference(text, builtin["prompt"].get<std::string>()));
            }
        }
        std::printf("%s (%s): %zu conversations; same text %d, same ids %d, llama_tokenize(ds4 text) = ds4 ids %d; "
                    "built-in ChatML compared %d; with tools %d, with tool calls %d\n",
                    model.label.c_str(), choice.name.c_str(), cases.size(), text_equal, ids_equal, tokenization_equal,
                    builtin_compared, with_tools, with_tool_calls);
        EXPECT_EQ(failures, 0);
        EXPECT_EQ(ids_equal, n);
        EXPECT_EQ(text_equal, n);
        EXPECT_EQ(tokenization_equal, n);
        EXPECT_GT(with_tools, n / 4) << "the generator hardly offered tools";
        EXPECT_GT(with_tool_calls, n / 20) << "the generator hardly produced tool calls";
    }

    TempDir tmp_;
    const fs::path& dir_ = tmp_.path();
    uint64_t seed_ = 0;
};

constexpr int kConversations = 60;

TEST_F(ChatPromptVsLlama, Qwen3TemplatesAndTokenizer) {
    const fs::path qwen = synth("qwen3moe", "qwen3.gguf");
    compare({"qwen3", qwen, "qwen3", {""}, /*chatml_when_thinking=*/true}, kConversations);
    compare({"qwen3-instruct-2507",
             with_template(qwen, kFixtureTemplates / "Qwen3-235B-A22B-Instruct-2507.jinja", "instruct.gguf"),
             "qwen3-instruct-2507", {""}, false, /*chatml_always=*/true},
            kConversations);
    compare({"qwen3-thinking-2507",
             with_template(qwen, kFixtureTemplates / "Qwen3-4B-Thinking-2507.jinja", "thinking.gguf"),
             "qwen3-thinking-2507"},
            kConversations);
}

TEST_F(ChatPromptVsLlama, DeepSeekV4TemplatesAndTokenizer) {
    const fs::path v4 = synth("deepseek4", "deepseek4.gguf");
    compare({"deepseek4", v4, "deepseek4", {"", "max"}}, kConversations);
    compare({"deepseek4-flash-0731",
             with_template(v4, kLlamaTemplates / "deepseek-ai-DeepSeek-V4-Flash-0731.jinja", "flash0731.gguf"),
             "deepseek4-flash-0731", {"", "high", "max"}},
            kConversations);
}

// GLM-5's file as synth writes it (GLM's special tokens, pre-tokenizer
// glm4; the stand-in's BPE pieces) with the GLM-4.7 template it embeds, and
// the same vocabulary under GLM-4.6's.
TEST_F(ChatPromptVsLlama, GlmTemplatesAndTokenizer) {
    const fs::path glm = synth("glm-dsa", "glm.gguf", {"--n-layer", "1", "--type", "q8_0"});
    ChatModel glm47{"glm-4.7", glm, "glm-4.7"};
    glm47.ascii_edges = true;
    compare(glm47, kConversations);
    ChatModel glm46{"glm-4.6", with_template(glm, kLlamaTemplates / "GLM-4.6.jinja", "glm46.gguf"), "glm-4.6"};
    glm46.ascii_edges = true;
    compare(glm46, kConversations);
}

}  // namespace
}  // namespace ds4::oracle

// Renders hundreds of random DeepSeek V4 conversations (system prompts,
// multi-turn history with reasoning, tool definitions, tool calls with random
// JSON arguments, tool results, every thinking mode and option) with ds4's
// renderers and with the real templates from llama.cpp's collection under
// @huggingface/jinja (transformers.js's Jinja engine), and compares bytes.
// Fresh seed every run; one node process for the whole batch.
#include <gtest/gtest.h>

#include "chat/chat.h"
#include "chat/python_json.h"
#include "common/error.h"
#include "chat_deepseek4_random.h"

using namespace ds4_test;

TEST(ChatDeepSeek4Oracle, DetectsBothV4TemplatesAndNothingElse) {
    EXPECT_EQ(ds4::detect_chat_template(read_file(kLlamaTemplates / "deepseek-ai-DeepSeek-V4.jinja")), "deepseek4");
    EXPECT_EQ(ds4::detect_chat_template(read_file(kLlamaTemplates / "deepseek-ai-DeepSeek-V4-Flash-0731.jinja")),
              "deepseek4-flash-0731");
    for (const char* other : {"deepseek-ai-DeepSeek-V3.2.jinja", "deepseek-ai-DeepSeek-V3.1.jinja",
                              "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"}) {
        EXPECT_EQ(ds4::detect_chat_template(read_file(kLlamaTemplates / other)), "") << other;
    }
    EXPECT_EQ(ds4::detect_chat_template(read_file(kLlamaTemplates / "Qwen-Qwen3-0.6B.jinja")), "qwen3");
}

TEST(ChatDeepSeek4Oracle, RandomConversationsMatchTheRealTemplatesByteForByte) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    DeepSeekConversations gen(seed);

    // Every template in the collection that ds4 claims to render as a
    // DeepSeek V4 variant: a false detection shows up as a mismatch here.
    std::vector<std::string> templates, names, renderers;
    for (const auto& entry : fs::directory_iterator(kLlamaTemplates)) {
        if (entry.path().extension() != ".jinja") continue;
        std::string source = read_file(entry.path());
        std::string renderer = ds4::detect_chat_template(source);
        if (renderer.starts_with("deepseek4")) {
            templates.push_back(source);
            names.push_back(entry.path().filename().string());
            renderers.push_back(renderer);
        }
    }
    ASSERT_GE(templates.size(), 2u) << "the DeepSeek V4 templates are missing under " << kLlamaTemplates;

    const int kCases = 500;
    ojson cases = ojson::array();
    for (int i = 0; i < kCases; ++i) cases.push_back(gen.case_variables());
    const ojson response = render_with_hf_jinja(templates, cases);
    const ojson& results = response.at("results");
    ASSERT_EQ(results.size(), templates.size());

    int mismatches = 0, compared = 0, with_tool_calls = 0;
    for (size_t t = 0; t < templates.size(); ++t) {
        for (size_t i = 0; i < cases.size(); ++i) {
            const ojson& expected = results[t][i];
            const ojson& c = cases[i];
            std::string context = names[t] + " (" + renderers[t] + "), case " + std::to_string(i) + ": " + c.dump();
            ASSERT_TRUE(expected.is_string()) << context << "\n@huggingface/jinja failed: " << expected.dump();
            std::string ours;
            try {
                ours = ds4::render_chat(renderers[t], to_messages(c["messages"]), to_options(c));
            } catch (const ds4::Error& e) {
                ADD_FAILURE() << context << "\nds4 threw: " << e.what();
                continue;
            }
            ++compared;
            if (ours.find("tool_calls>") != std::string::npos) ++with_tool_calls;
            if (ours != expected.get<std::string>() && ++mismatches <= 5) {
                ADD_FAILURE() << context << "\nexpected " << show(expected.get<std::string>()) << "\n     got "
                              << show(ours);
            }
        }
    }
    EXPECT_EQ(mismatches, 0) << "of " << compared << " renderings (@huggingface/jinja " << response["version"]
                             << ")";
    EXPECT_EQ(compared, kCases * int(templates.size()));
    EXPECT_GT(with_tool_calls, kCases / 10) << "the generator hardly produced tool calls";
}

// The oracle engine prints numbers the JavaScript way; the templates were
// written for Python's json.dumps (Hugging Face transformers' tojson). ds4
// follows Python, so its float spelling is checked against CPython itself.
TEST(ChatDeepSeek4Oracle, FloatsAreSpelledLikePythonsRepr) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    std::vector<double> values = {0.0, -0.0, 1.0, 2.0, 1e15, 1e16, 1e-4, 1e-5, 1.5e300, 5e-324, 0.1, 123456789.0};
    for (int i = 0; i < 2000; ++i) {
        double v;
        do {
            uint64_t bits = rng();
            std::memcpy(&v, &bits, sizeof v);
        } while (!std::isfinite(v));
        values.push_back(v);
        values.push_back(std::ldexp(double(rng() % 100000), int(rng() % 80) - 40));  // short and integral ones
    }
    std::string input;
    for (double v : values) input += ojson(v).dump() + "\n";
    const fs::path in_path = fs::temp_directory_path() / ("ds4_floats_" + std::to_string(seed) + ".txt");
    const fs::path out_path = fs::temp_directory_path() / ("ds4_floats_" + std::to_string(seed) + ".out");
    std::ofstream(in_path) << input;
    const std::string command = "python3 -c 'import sys, json\nfor line in sys.stdin: print(json.dumps(float(line)))' < '" +
                                in_path.string() + "' > '" + out_path.string() + "'";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    std::istringstream python(read_file(out_path));
    fs::remove(in_path);
    fs::remove(out_path);
    int mismatches = 0;
    for (double v : values) {
        std::string expected;
        ASSERT_TRUE(std::getline(python, expected));
        std::string ours = ds4::python_float_repr(v);
        if (ours != expected && ++mismatches <= 10) ADD_FAILURE() << "python " << expected << ", ds4 " << ours;
    }
    EXPECT_EQ(mismatches, 0);
}

TEST(ChatDeepSeek4Oracle, BadInputGetsAClearError) {
    ds4::ChatOptions options;
    std::vector<ds4::ChatMessage> chat = {{"user", "hi", {}}};
    chat.push_back({"assistant", "", {}, {{"f", "[1, 2]"}}});
    EXPECT_THROW(ds4::render_deepseek4(chat, options), ds4::Error);  // arguments not an object
    chat.back().tool_calls[0].arguments = "{\"a\": ";
    EXPECT_THROW(ds4::render_deepseek4(chat, options), ds4::Error);  // not JSON
    EXPECT_THROW(ds4::render_deepseek4({{"robot", "hi", {}}}, options), ds4::Error);
    options.tools = "{\"type\": \"function\"}";
    EXPECT_THROW(ds4::render_deepseek4({{"user", "hi", {}}}, options), ds4::Error);
    options.tools = "[{\"type\": \"function\"}]";
    EXPECT_THROW(ds4::render_deepseek4({{"user", "hi", {}}}, options), ds4::Error);
}

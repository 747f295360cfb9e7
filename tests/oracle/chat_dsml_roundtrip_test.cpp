// DSML round trip: the real DeepSeek V4 template (under @huggingface/jinja)
// renders random assistant turns with reasoning, text and tool calls with
// random JSON arguments; ds4's parser must read back exactly what was
// rendered. Every cut point of a sample of those outputs, parsed as a
// stream, must be "incomplete" or consistent with the whole, never malformed.
#include <gtest/gtest.h>

#include "chat/dsml_parse.h"
#include "chat_deepseek4_random.h"

using namespace ds4_test;

namespace {

const std::string kAssistant = "<｜Assistant｜>";

struct Expected {
    bool thinking;
    std::string reasoning, content;
    ojson calls;  // array of {"name", "arguments"}
};

Expected expected_of(const ojson& message, bool thinking) {
    Expected e{thinking, "", "", ojson::array()};
    if (thinking && message.contains("reasoning_content") && message["reasoning_content"].is_string()) {
        e.reasoning = message["reasoning_content"].get<std::string>();
    }
    if (message["content"].is_string()) e.content = message["content"].get<std::string>();
    if (message.contains("tool_calls")) {
        for (const ojson& call : message["tool_calls"]) {
            e.calls.push_back({{"name", call["function"]["name"]}, {"arguments", call["function"]["arguments"]}});
        }
    }
    return e;
}

ojson calls_json(const std::vector<ds4::DsmlToolCall>& calls) {
    ojson out = ojson::array();
    for (const auto& c : calls) out.push_back({{"name", c.name}, {"arguments", c.arguments}});
    return out;
}

// Numbers compare by value (the template prints 1.5 and nlohmann may read
// back a float where an integer was, or the reverse).
bool same_json(const ojson& a, const ojson& b) { return a == b; }

}  // namespace

TEST(ChatDsmlRoundTrip, TemplateRenderedToolCallsParseBackExactly) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    DeepSeekConversations gen(seed);
    gen.markup_in_text = false;  // reasoning with </think>, text with DSML tags cannot round-trip

    const std::string source = read_file(kLlamaTemplates / "deepseek-ai-DeepSeek-V4.jinja");
    const int kCases = 400;
    ojson cases = ojson::array();
    std::vector<Expected> expected;
    for (int i = 0; i < kCases; ++i) {
        ojson assistant = gen.assistant(false);
        ojson calls = ojson::array();
        int n = gen.uniform(i % 4 == 0 ? 0 : 1, 4);
        for (int k = 0; k < n; ++k) calls.push_back(gen.tool_call());
        assistant["tool_calls"] = calls;
        bool thinking = gen.chance(0.7);
        ojson messages = ojson::array({{{"role", "user"}, {"content", "q"}}, assistant});
        cases.push_back({{"messages", messages}, {"thinking", thinking}, {"add_generation_prompt", false}});
        expected.push_back(expected_of(assistant, thinking));
    }
    const ojson response = render_with_hf_jinja({source}, cases);
    const ojson& results = response.at("results").at(0);
    ASSERT_EQ(results.size(), cases.size());

    int failures = 0, total_calls = 0, cuts = 0;
    for (size_t i = 0; i < cases.size() && failures < 5; ++i) {
        ASSERT_TRUE(results[i].is_string()) << results[i].dump();
        const std::string rendered = results[i].get<std::string>();
        const Expected& e = expected[i];
        // The model's output is what follows the generation prompt.
        const std::string prompt_end = kAssistant + (e.thinking ? "<think>" : "</think>");
        size_t at = rendered.find(prompt_end);
        ASSERT_NE(at, std::string::npos) << rendered;
        const std::string output = rendered.substr(at + prompt_end.size());
        const std::string context = "case " + std::to_string(i) + ", output " + show(output);

        ds4::DsmlOutput parsed = ds4::parse_dsml_output(output, e.thinking, /*partial=*/false);
        total_calls += int(parsed.tool_calls.size());
        bool ok = parsed.status == ds4::DsmlStatus::complete && parsed.reasoning_content == e.reasoning &&
                  parsed.content == e.content && same_json(calls_json(parsed.tool_calls), e.calls);
        if (!ok) {
            ++failures;
            ADD_FAILURE() << context << "\nstatus " << int(parsed.status) << " " << parsed.error << "\nreasoning "
                          << show(parsed.reasoning_content) << " want " << show(e.reasoning) << "\ncontent "
                          << show(parsed.content) << " want " << show(e.content) << "\ncalls "
                          << calls_json(parsed.tool_calls).dump() << "\n want " << e.calls.dump();
            continue;
        }

        // Streaming: every prefix of a sample of outputs.
        if (i % 8 != 0) continue;
        const std::string content_then_block = e.content + (e.calls.empty() ? "" : "\n\n");
        for (size_t cut = 0; cut < output.size(); ++cut) {
            ++cuts;
            ds4::DsmlOutput p = ds4::parse_dsml_output(std::string_view(output).substr(0, cut), e.thinking, true);
            ojson got_calls = calls_json(p.tool_calls);
            bool calls_prefix = got_calls.size() <= e.calls.size();
            for (size_t k = 0; calls_prefix && k < got_calls.size(); ++k) calls_prefix = got_calls[k] == e.calls[k];
            bool consistent = p.status != ds4::DsmlStatus::malformed && e.reasoning.starts_with(p.reasoning_content) &&
                              content_then_block.starts_with(p.content) && calls_prefix;
            if (!consistent) {
                ++failures;
                ADD_FAILURE() << context << "\ncut at byte " << cut << ": status " << int(p.status) << " "
                              << p.error << "\nreasoning " << show(p.reasoning_content) << "\ncontent "
                              << show(p.content) << "\ncalls " << got_calls.dump();
                break;
            }
        }
    }
    EXPECT_EQ(failures, 0);
    EXPECT_GT(total_calls, kCases) << "too few tool calls were generated to prove anything";
    EXPECT_GT(cuts, 1000);
}

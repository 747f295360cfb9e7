// Random DeepSeek V4 conversations (OpenAI-shaped JSON) and the
// @huggingface/jinja oracle runner, shared by chat_deepseek4_test.cpp and
// chat_dsml_roundtrip_test.cpp.
//
// Limits of the oracle that shape the generator (not limits of ds4):
// - @huggingface/jinja prints numbers with JavaScript's JSON.stringify, so
//   floats stay non-integral in [1e-4, 1e15), where JS and Python's repr
//   agree digit for digit (ds4 follows Python: 2.0 and 1e-05 print as Python
//   does, checked against CPython in chat_deepseek4_test.cpp), and integers
//   stay within +-2^53.
// - JavaScript objects put integer-like keys ("7") first, so keys always
//   contain a letter.
// - Tool-call arguments go to the template as objects: neither Python
//   jinja2 nor @huggingface/jinja has the `from_json` filter the template
//   uses for string arguments (llama.cpp's engine adds it).
#pragma once

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "chat/chat.h"
#include "support/test_seed.h"
#include "support/utf8.h"

namespace ds4_test {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

inline const fs::path kLlamaTemplates = fs::path(DS4_DEPS_DIR) / "oracle/llama.cpp/models/templates";

inline std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path.string());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

using ds4::test::append_utf8;

class DeepSeekConversations {
public:
    explicit DeepSeekConversations(uint64_t seed) : rng_(seed) {}

    // false: keep text free of the markup the DSML parser cannot tell apart
    // from real tags (round trips); true: anything, markup included.
    bool markup_in_text = true;

    int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
    bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }

    std::string code_points(int count) {
        std::string out;
        for (int i = 0; i < count; ++i) {
            char32_t cp;
            switch (uniform(0, 3)) {
                case 0: cp = char32_t(uniform(0x01, 0x7F)); break;
                case 1: cp = char32_t(uniform(0x80, 0x7FF)); break;
                case 2:
                    do cp = char32_t(uniform(0x800, 0xFFFD));
                    while (cp >= 0xD800 && cp <= 0xDFFF);
                    break;
                default: cp = char32_t(uniform(0x10000, 0x10FFFF)); break;
            }
            append_utf8(out, cp);
        }
        return out;
    }

    std::string text(int max_pieces = 6) {
        static const std::vector<std::string> plain = {
            "hello", " world", "\n", "\n\n", "  ", "\t", "'", "\"", "\\", "\\n", "é", "中文", "🙂", "👩‍💻",
            "\u0301", "\u200b", "مرحبا", "\r\n", "{{ x }}", "{% if %}", "<", ">", "think", "null", "{}", "0"};
        static const std::vector<std::string> markup = {
            "<think>", "</think>", "<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>", "<tool_result>",
            "</tool_result>", "<｜DSML｜tool_calls>", "</｜DSML｜invoke>", "<｜DSML｜parameter name=\"x\" string=\"true\">",
            "｜DSML｜", "</｜DSML｜parameter>"};
        std::string out;
        int n = uniform(0, max_pieces);
        for (int i = 0; i < n; ++i) {
            int kind = uniform(0, 9);
            if (kind < 5) {
                out += plain[uniform(0, int(plain.size()) - 1)];
            } else if (kind < 6 && markup_in_text) {
                out += markup[uniform(0, int(markup.size()) - 1)];
            } else if (kind < 8) {
                int len = uniform(1, 8);
                for (int k = 0; k < len; ++k) out += char(uniform(0x20, 0x7E));
            } else {
                out += code_points(uniform(1, 4));
            }
        }
        if (!markup_in_text) {
            // A '<' at the very end could join with following markup; keep it out.
            while (!out.empty() && out.back() == '<') out.pop_back();
        }
        return out;
    }

    // Names and keys: what a tool schema would use, plus Unicode and spaces;
    // never only digits (see above), never a quote or angle bracket.
    std::string identifier() {
        static const std::vector<std::string> words = {"city", "query", "n", "unit", "limit", "path", "mode",
                                                       "x_1", "get-weather", "ns.fn", "Ünïcode", "名前", "a b"};
        std::string out = words[uniform(0, int(words.size()) - 1)];
        if (chance(0.4)) out += "_" + std::to_string(uniform(0, 99));
        if (chance(0.1)) {
            std::string extra = code_points(uniform(1, 3));
            for (char c : extra) {
                if (c != '"' && c != '<' && c != '>' && c != '\n') out += c;
            }
        }
        return out;
    }

    double nonintegral_float() {
        for (;;) {
            double raw = std::uniform_real_distribution<double>(1.0, 10.0)(rng_) * std::pow(10.0, uniform(-4, 14));
            char buf[40];
            std::snprintf(buf, sizeof buf, "%.*e", uniform(0, 16), raw);  // 1 to 17 significant digits
            double value = std::strtod(buf, nullptr);
            if (chance(0.5)) value = -value;
            if (std::abs(value) >= 1e-4 && std::abs(value) < 1e15 && value != std::floor(value)) return value;
        }
    }

    ojson value(int depth) {
        int kind = uniform(0, depth >= 3 ? 5 : 7);
        switch (kind) {
            case 0: return chance(0.2) ? std::string() : text(4);
            case 1: return int64_t(std::uniform_int_distribution<int64_t>(-(int64_t(1) << 53), int64_t(1) << 53)(rng_));
            case 2: return int64_t(uniform(-5, 100));
            case 3: return nonintegral_float();
            case 4: return chance(0.5);
            case 5: return nullptr;
            case 6: {
                ojson array = ojson::array();
                int n = uniform(0, 4);
                for (int i = 0; i < n; ++i) array.push_back(value(depth + 1));
                return array;
            }
            default: return object(depth + 1, 4);
        }
    }

    ojson object(int depth, int max_keys) {
        ojson obj = ojson::object();
        int n = uniform(0, max_keys);
        for (int i = 0; i < n; ++i) obj[identifier()] = value(depth);
        return obj;
    }

    ojson tool_call() {
        ojson args = object(0, 5);
        return {{"id", "call_" + std::to_string(uniform(0, 1 << 20))},
                {"type", "function"},
                {"function", {{"name", identifier()}, {"arguments", args}}}};
    }

    ojson assistant(bool allow_tool_calls = true) {
        ojson m = {{"role", "assistant"}};
        int c = uniform(0, 9);
        if (c == 0) {
            m["content"] = nullptr;
        } else if (c < 3) {
            m["content"] = "";
        } else {
            m["content"] = text();
        }
        int r = uniform(0, 9);
        if (r < 3) {
            // no reasoning_content key
        } else if (r < 4) {
            m["reasoning_content"] = nullptr;
        } else if (r < 5) {
            m["reasoning_content"] = "";
        } else {
            m["reasoning_content"] = text();
        }
        if (allow_tool_calls && chance(0.4)) {
            ojson calls = ojson::array();
            int n = uniform(0, 3);
            for (int i = 0; i < n; ++i) calls.push_back(tool_call());
            m["tool_calls"] = calls;
        }
        return m;
    }

    ojson simple(const std::string& role) {
        ojson m = {{"role", role}};
        int c = uniform(0, 9);
        m["content"] = c == 0 ? ojson(nullptr) : c == 1 ? ojson("") : ojson(text());
        if (role == "tool") m["tool_call_id"] = "call_" + std::to_string(uniform(0, 99));
        return m;
    }

    ojson messages() {
        ojson out = ojson::array();
        if (chance(0.5)) out.push_back(simple("system"));
        int turns = uniform(0, 5);
        for (int t = 0; t < turns; ++t) {
            int shape = uniform(0, 9);
            if (shape < 5) {
                out.push_back(simple(chance(0.85) ? "user" : "developer"));
                out.push_back(assistant());
            } else if (shape < 8) {
                out.push_back(assistant());
                int tools = uniform(1, 3);
                for (int k = 0; k < tools; ++k) out.push_back(simple("tool"));
            } else {
                static const char* roles[] = {"system", "user", "developer", "assistant", "tool"};
                std::string role = roles[uniform(0, 4)];
                out.push_back(role == "assistant" ? assistant() : simple(role));
            }
        }
        if (chance(0.7)) out.push_back(simple("user"));
        return out;
    }

    ojson tools() {
        ojson list = ojson::array();
        int n = uniform(0, 3);
        for (int i = 0; i < n; ++i) {
            if (chance(0.1)) {
                list.push_back({{"type", "retrieval"}, {"retrieval", object(1, 2)}});
                continue;
            }
            ojson properties = ojson::object();
            ojson required = ojson::array();
            int params = uniform(0, 3);
            for (int k = 0; k < params; ++k) {
                std::string name = identifier();
                static const char* types[] = {"string", "integer", "number", "boolean", "array", "object"};
                properties[name] = {{"type", types[uniform(0, 5)]}, {"description", text(3)}};
                if (chance(0.5)) required.push_back(name);
            }
            ojson function = {{"name", identifier()}, {"description", text(4)}};
            function["parameters"] = {{"type", "object"}, {"properties", properties}, {"required", required}};
            if (chance(0.2)) function["strict"] = chance(0.5);
            list.push_back({{"type", "function"}, {"function", function}});
        }
        return list;
    }

    // The template's variables for one rendering.
    ojson case_variables() {
        ojson c = {{"messages", messages()}};
        if (chance(0.5)) c["tools"] = tools();
        if (chance(0.8)) c["add_generation_prompt"] = chance(0.6);
        switch (uniform(0, 4)) {  // the three ways of saying whether to think
            case 0: break;        // neither: no thinking
            case 1: case 2: c["thinking"] = chance(0.6); break;
            default: c["enable_thinking"] = chance(0.6); break;
        }
        switch (uniform(0, 5)) {
            case 0: case 1: break;
            case 2: c["reasoning_effort"] = "max"; break;
            case 3: c["reasoning_effort"] = "high"; break;
            case 4: c["reasoning_effort"] = "low"; break;
            default: c["reasoning_effort"] = ""; break;
        }
        if (chance(0.3)) c["drop_thinking"] = chance(0.5);
        if (chance(0.15)) c["response_format"] = chance(0.8) ? ojson(object(0, 3)) : value(0);
        if (chance(0.3)) c["bos_token"] = "<｜begin▁of▁sentence｜>";
        return c;
    }

private:
    std::mt19937_64 rng_;
};

// The ds4 side of one case.
inline std::vector<ds4::ChatMessage> to_messages(const ojson& messages) {
    std::vector<ds4::ChatMessage> out;
    for (const ojson& m : messages) {
        ds4::ChatMessage msg;
        msg.role = m.at("role").get<std::string>();
        if (m.contains("content") && !m["content"].is_null()) msg.content = m["content"].get<std::string>();
        if (m.contains("reasoning_content") && !m["reasoning_content"].is_null()) {
            msg.reasoning_content = m["reasoning_content"].get<std::string>();
        }
        if (m.contains("tool_calls")) {
            for (const ojson& call : m["tool_calls"]) {
                msg.tool_calls.push_back({call["function"]["name"].get<std::string>(),
                                          call["function"]["arguments"].dump()});
            }
        }
        out.push_back(std::move(msg));
    }
    return out;
}

inline ds4::ChatOptions to_options(const ojson& c) {
    ds4::ChatOptions o;
    o.add_generation_prompt = c.value("add_generation_prompt", false);
    o.enable_thinking = c.contains("thinking") ? c["thinking"].get<bool>() : c.value("enable_thinking", false);
    o.reasoning_effort = c.value("reasoning_effort", "");
    if (c.contains("tools")) o.tools = c["tools"].dump();
    o.drop_thinking = c.value("drop_thinking", true);
    if (c.contains("response_format")) o.response_format = c["response_format"].dump();
    o.bos_token = c.value("bos_token", "");
    return o;
}

// Runs tests/oracle/chat_render_hf_jinja.mjs once over every template and
// case: results[template][case] is the rendered string or {"error": ...}.
inline ojson render_with_hf_jinja(const std::vector<std::string>& templates, const ojson& cases) {
    const fs::path helper = fs::path(DS4_SOURCE_DIR) / "tests/oracle/chat_render_hf_jinja.mjs";
    const fs::path node_modules = fs::path(DS4_DEPS_DIR) / "npm/node_modules";
    const fs::path out_path =
        fs::temp_directory_path() / ("ds4_hf_jinja_" + std::to_string(std::random_device{}()) + ".json");
    const std::string command =
        "node '" + helper.string() + "' '" + node_modules.string() + "' > '" + out_path.string() + "'";
    std::signal(SIGPIPE, SIG_IGN);  // a dying helper is reported by its exit status
    FILE* pipe = popen(command.c_str(), "w");
    if (!pipe) throw std::runtime_error("cannot start " + command);
    const std::string request = ojson{{"templates", templates}, {"cases", cases}}.dump();
    fwrite(request.data(), 1, request.size(), pipe);
    int status = pclose(pipe);
    if (status != 0) {
        fs::remove(out_path);
        throw std::runtime_error("the @huggingface/jinja oracle failed (exit status " + std::to_string(status) +
                                 "); run scripts/setup-npm.sh: " + command);
    }
    ojson response = ojson::parse(read_file(out_path));
    fs::remove(out_path);
    return response;
}

inline std::string show(const std::string& s) { return ojson(s).dump(); }

// DS4_TEST_SEED re-runs a printed seed (tests/support/test_seed.h).
inline uint64_t fresh_seed() { return ds4::test::test_seed(); }

}  // namespace ds4_test

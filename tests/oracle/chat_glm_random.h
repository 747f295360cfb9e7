// Random conversations for the GLM chat tests, in the OpenAI shape the
// Jinja templates read (tool-call arguments as JSON objects), with the text
// that matters to the GLM templates: think tags and inline reasoning,
// "/nothink" at the ends of user turns, the templates' own markers and tags
// (<|user|>, <tool_call>, <arg_value>, ...), and whitespace that Python's
// str.strip() removes but ASCII strips do not (U+00A0, U+3000, U+2028, ...)
// at the edges of content and reasoning. to_glm_messages gives ds4 the same
// conversation (arguments as JSON text, as the server passes them).
#pragma once

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "chat/chat.h"
#include "chat/python_json.h"
#include "support/utf8.h"

namespace ds4_test {

class GlmConversationGenerator {
public:
    using json = nlohmann::ordered_json;

    explicit GlmConversationGenerator(uint64_t seed) : rng_(seed) {}

    int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
    bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
    // Whether edge whitespace beyond ASCII may be drawn (llama.cpp's Jinja
    // strips ASCII only; the jinja2 comparison wants them, the llama.cpp
    // one leaves them out).
    bool unicode_edges = true;

    std::string pick(const std::vector<std::string>& v) { return v[size_t(uniform(0, int(v.size()) - 1))]; }

    std::string edge_space() {
        static const std::vector<std::string> ascii = {" ", "\n", "\n\n", "\t", "\r\n", "\x0b"};
        static const std::vector<std::string> unicode = {"\u00a0", "\u3000", "\u2028", "\u2003", "\u0085", "\x1c"};
        return unicode_edges && chance(0.4) ? pick(unicode) : pick(ascii);
    }

    std::string text(int max_pieces = 6) {
        static const std::vector<std::string> pieces = {
            "hello", " world", "\n", "\n\n", "  ", "\t", "<think>", "</think>", "<think>\n", "\n</think>\n",
            "<tool_call>", "</tool_call>", "<arg_key>", "</arg_value>", "<tool_response>", "<|user|>",
            "<|assistant|>", "<|observation|>", "<|system|>", "[gMASK]", "/nothink", "{{ x }}", "{% if %}", "'",
            "\"", "é", "中文", "🙂", "👩‍💻", "\u0301", "\u200b", "مرحبا", "\r\n", "think", "<", ">"};
        std::string out;
        if (chance(0.2)) out += edge_space();
        const int n = uniform(0, max_pieces);
        for (int i = 0; i < n; ++i) {
            const int kind = uniform(0, 9);
            if (kind < 6) {
                out += pick(pieces);
            } else if (kind < 8) {
                for (int k = uniform(1, 8); k > 0; --k) out += char(uniform(0x20, 0x7E));
            } else {
                for (int k = uniform(1, 3); k > 0; --k) ds4::test::append_utf8(out, code_point());
            }
        }
        if (chance(0.2)) out += edge_space();
        return out;
    }

    char32_t code_point() {
        switch (uniform(0, 3)) {
            case 0: return char32_t(uniform(0x20, 0x7E));
            case 1: return char32_t(uniform(0xA0, 0x7FF));
            case 2: {
                char32_t cp;
                do cp = char32_t(uniform(0x800, 0xFFFD));
                while (cp >= 0xD800 && cp <= 0xDFFF);
                return cp;
            }
            default: return char32_t(uniform(0x10000, 0x10FFFF));
        }
    }

    std::string user_content() {
        std::string s = chance(0.1) ? "" : text();
        if (chance(0.2)) s += "/nothink";  // the template does not add a second one
        return s;
    }

    std::string assistant_content() {
        switch (uniform(0, 6)) {
            case 0: return text();
            case 1: return "<think>\n" + text() + "\n</think>\n\n" + text();
            case 2: return text(2) + "<think>" + text() + "</think>" + text();
            case 3: return "</think>" + text();
            case 4: return text() + "</think>" + text() + "</think>" + text();  // two closings
            case 5: return "\n\n<think>" + text() + "<think>" + text() + "\n\n</think>\n\n\n" + text();
            default: return "";
        }
    }

    // Names and keys as tool schemas use them; never '<' or a line end in
    // a name (the call format ends a name there).
    std::string identifier() {
        static const std::vector<std::string> words = {"get_weather", "city", "n", "unit", "path", "ns.fn",
                                                       "x-1", "Ünïcode", "名前", "a_b"};
        return pick(words) + (chance(0.3) ? std::to_string(uniform(0, 99)) : "");
    }

    json value(int depth) {
        switch (uniform(0, depth > 2 ? 4 : 6)) {
            case 0: return text(3);
            case 1: return uniform(-1000, 1000);
            case 2: return chance(0.5);
            case 3: return nullptr;
            case 4: return double(uniform(-100000, 100000)) / double(uniform(1, 1000));
            case 5: {
                json a = json::array();
                for (int i = uniform(0, 3); i > 0; --i) a.push_back(value(depth + 1));
                return a;
            }
            default: {
                json o = json::object();
                for (int i = uniform(0, 3); i > 0; --i) o[identifier()] = value(depth + 1);
                return o;
            }
        }
    }

    json tools() {
        json list = json::array();
        for (int i = uniform(0, 3); i > 0; --i) {
            json params = {{"type", "object"}, {"properties", json::object()}};
            for (int k = uniform(0, 3); k > 0; --k)
                params["properties"][identifier()] = {{"type", chance(0.5) ? "string" : "integer"},
                                                      {"description", text(2)}};
            list.push_back({{"type", "function"},
                            {"function", {{"name", identifier()}, {"description", text(3)}, {"parameters", params}}}});
        }
        return list;
    }

    json tool_calls() {
        json calls = json::array();
        for (int i = uniform(1, 3); i > 0; --i) {
            json args = json::object();
            for (int k = uniform(0, 3); k > 0; --k) args[identifier()] = value(1);
            calls.push_back({{"id", "call_" + std::to_string(uniform(0, 1 << 20))},
                             {"type", "function"},
                             {"function", {{"name", identifier()}, {"arguments", args}}}});
        }
        return calls;
    }

    json message(const std::string& role) {
        json m = {{"role", role}};
        if (role == "assistant") {
            m["content"] = assistant_content();
            if (chance(0.35)) m["tool_calls"] = tool_calls();
            const int r = uniform(0, 9);
            if (r < 4) {
                // no reasoning_content key at all
            } else if (r < 5) {
                m["reasoning_content"] = "";
            } else {
                m["reasoning_content"] = text();
            }
        } else if (role == "user") {
            m["content"] = user_content();
        } else {
            m["content"] = chance(0.1) ? "" : text();
        }
        return m;
    }

    json conversation() {
        json messages = json::array();
        if (chance(0.5)) messages.push_back(message("system"));
        for (int t = uniform(0, 5); t > 0; --t) {
            const int shape = uniform(0, 9);
            if (shape < 6) {
                messages.push_back(message("user"));
                messages.push_back(message("assistant"));
            } else if (shape < 8) {
                messages.push_back(message("assistant"));
                for (int k = uniform(1, 3); k > 0; --k) messages.push_back(message("tool"));
            } else {
                static const char* roles[] = {"system", "user", "assistant", "tool"};
                messages.push_back(message(roles[uniform(0, 3)]));
            }
        }
        if (chance(0.7)) messages.push_back(message("user"));
        if (messages.empty()) messages.push_back(message("user"));
        return messages;
    }

private:
    std::mt19937_64 rng_;
};

// The same conversation for ds4: arguments as JSON text in the order given.
inline std::vector<ds4::ChatMessage> to_glm_messages(const nlohmann::ordered_json& messages) {
    std::vector<ds4::ChatMessage> out;
    for (const auto& m : messages) {
        ds4::ChatMessage msg{m.at("role").get<std::string>(), m.at("content").get<std::string>(), {}};
        if (m.contains("reasoning_content")) msg.reasoning_content = m["reasoning_content"].get<std::string>();
        if (m.contains("tool_calls"))
            for (const auto& c : m["tool_calls"])
                msg.tool_calls.push_back({c["function"]["name"].get<std::string>(),
                                          ds4::python_json_dumps(c["function"]["arguments"]), c["id"].get<std::string>()});
        out.push_back(std::move(msg));
    }
    return out;
}

}  // namespace ds4_test

// GLM's tool calls (the XML-like format its templates teach):
//   <tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>
// GLM-4.5/4.6 put a newline after the name and after each tag, GLM-4.7 and
// later none; calls follow each other directly. Argument values are text:
// the templates print strings as they are and other values as JSON, so a
// value is read back as a string or as JSON by the tool's schema where the
// request offered one (ToolParamTypes), else as JSON when it parses as JSON.
// The arguments are reported as a JSON object in Python's spelling
// (chat/python_json.h), in the order written; see chat/tool_calls.h for the
// section and streaming rules.
#include <nlohmann/json.hpp>

#include "chat/python_json.h"
#include "chat/text_scan.h"
#include "chat/tool_calls.h"

namespace ds4 {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kKeyOpen = "<arg_key>";
constexpr std::string_view kKeyClose = "</arg_key>";
constexpr std::string_view kValueOpen = "<arg_value>";
constexpr std::string_view kValueClose = "</arg_value>";

// A parameter's kind from its JSON schema: a string when it may be one
// (type "string", a type list or an anyOf/oneOf holding one), JSON when it
// names other types, unknown when it names none.
ToolParamTypes::Kind schema_kind(const ordered_json& schema) {
    using Kind = ToolParamTypes::Kind;
    if (!schema.is_object()) return Kind::unknown;
    bool typed = false;
    auto mark = [&](const ordered_json& type) {
        if (type.is_string()) {
            typed = true;
            return type.get<std::string>() == "string";
        }
        return false;
    };
    if (const auto t = schema.find("type"); t != schema.end()) {
        if (mark(*t)) return Kind::string;
        if (t->is_array())
            for (const auto& e : *t)
                if (mark(e)) return Kind::string;
    }
    for (const char* combinator : {"anyOf", "oneOf"}) {
        const auto c = schema.find(combinator);
        if (c == schema.end() || !c->is_array()) continue;
        for (const auto& option : *c) {
            const Kind k = schema_kind(option);
            if (k == Kind::string) return Kind::string;
            typed = typed || k == Kind::json;
        }
    }
    return typed ? Kind::json : Kind::unknown;
}

// A value as the call's arguments hold it.
ordered_json glm_value(std::string_view text, ToolParamTypes::Kind kind) {
    if (kind == ToolParamTypes::Kind::string) return std::string(text);
    // A NUL byte ends nlohmann's input early: never JSON.
    if (text.find('\0') == std::string_view::npos) {
        ordered_json parsed = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (!parsed.is_discarded()) return parsed;
    }
    return std::string(text);
}

// What one call's text (after "<tool_call>", up to its close or the end of
// the text) says so far.
struct GlmCallBody {
    bool named = false;      // the name is complete (something followed it)
    bool malformed = false;  // not a call: stray text, a tag out of place, a repeated key
    bool clean = false;      // the text ends between two parameters (a whole call may end here)
    ToolCallText call;
    ordered_json args = ordered_json::object();
};

// Reads `body` (the text between <tool_call> and </tool_call>, or to the
// end of the text while it streams): the name up to the first tag or line
// end, then <arg_key>/<arg_value> pairs with whitespace around them.
GlmCallBody read_glm_call(std::string_view body, const ToolParamTypes& types) {
    GlmCallBody r;
    const size_t from = skip_chat_space(body, 0);
    const size_t name_end = body.find_first_of("<\n", from);
    if (name_end == std::string_view::npos) return r;  // the name may still grow
    const size_t to = trim_chat_space_end(body, name_end);
    if (from >= to) {
        r.malformed = true;
        return r;
    }
    r.call.name = std::string(body.substr(from, to - from));
    r.named = true;
    size_t pos = name_end;
    for (;;) {
        pos = skip_chat_space(body, pos);
        if (pos == body.size()) {
            r.clean = true;  // more may come, or the call ends here
            return r;
        }
        const std::string_view rest = body.substr(pos);
        if (!rest.starts_with(kKeyOpen)) {
            // Only the start of a key tag (or, streaming, of the call's
            // close) may still be arriving.
            r.malformed = !kKeyOpen.starts_with(rest) && !kCallClose.starts_with(rest);
            return r;
        }
        const size_t key_at = pos + kKeyOpen.size();
        const size_t key_end = body.find(kKeyClose, key_at);
        if (key_end == std::string_view::npos) return r;
        const std::string key(body.substr(key_at, key_end - key_at));
        pos = skip_chat_space(body, key_end + kKeyClose.size());
        if (pos == body.size()) return r;
        if (!body.substr(pos).starts_with(kValueOpen)) {
            r.malformed = !kValueOpen.starts_with(body.substr(pos));
            return r;
        }
        const size_t value_at = pos + kValueOpen.size();
        const size_t value_end = body.find(kValueClose, value_at);
        if (value_end == std::string_view::npos) return r;
        if (r.args.contains(key)) {
            // Which one counts is a guess (a stream has sent the first):
            // the call stays text, like any broken call.
            r.malformed = true;
            return r;
        }
        r.args[key] = glm_value(body.substr(value_at, value_end - value_at), types.kind(r.call.name, key));
        pos = value_end + kValueClose.size();
    }
}

// The arguments of a call still arriving: its closed parameters, without
// the final '}' more may precede ("" before the first one closes).
std::string glm_arguments_so_far(const ordered_json& args) {
    if (args.empty()) return "";
    std::string text = python_json_dumps(args);
    text.pop_back();
    return text;
}

}  // namespace

ToolParamTypes::ToolParamTypes(const std::string& specs_json) {
    const ordered_json specs = ordered_json::parse(specs_json, nullptr, /*allow_exceptions=*/false);
    if (!specs.is_array()) return;
    for (const auto& spec : specs) {
        const ordered_json& f = spec.is_object() && spec.contains("function") ? spec["function"] : spec;
        if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) continue;
        std::vector<std::pair<std::string, Kind>> params;
        const auto p = f.find("parameters");
        if (p != f.end() && p->is_object() && p->contains("properties") && (*p)["properties"].is_object())
            for (const auto& [name, schema] : (*p)["properties"].items()) params.emplace_back(name, schema_kind(schema));
        functions_.emplace_back(f["name"].get<std::string>(), std::move(params));
    }
}

ToolParamTypes::Kind ToolParamTypes::kind(std::string_view function, std::string_view param) const {
    for (const auto& [name, params] : functions_) {
        if (name != function) continue;
        for (const auto& [p, k] : params)
            if (p == param) return k;
    }
    return Kind::unknown;
}

ToolCallScan scan_glm_tool_calls(std::string_view answer, bool partial, const ToolParamTypes& types) {
    ToolCallScan scan;
    scan.section = scan.decided = answer.size();
    const size_t first = answer.find(kCallOpen);
    if (first == std::string_view::npos) {
        if (partial) scan.decided = trim_chat_space_end(answer, answer.size() - partial_suffix(answer, kCallOpen));
        return scan;
    }
    size_t pos = first;
    for (;;) {
        const size_t body = pos + kCallOpen.size();
        const size_t close = answer.find(kCallClose, body);
        if (close == std::string_view::npos) {
            // Unfinished: announced once named, with its closed parameters.
            const GlmCallBody r = read_glm_call(answer.substr(body), types);
            if (partial && r.named && !r.malformed)
                scan.calls.push_back({r.call.name, glm_arguments_so_far(r.args), false});
            break;
        }
        // A whole call: read as if it streamed (a line end after it ends a
        // bare name), and it must end between two parameters.
        const GlmCallBody r = read_glm_call(std::string(answer.substr(body, close - body)) + "\n", types);
        if (!r.named || r.malformed || !r.clean) break;
        scan.calls.push_back({r.call.name, python_json_dumps(r.args), true});
        pos = skip_chat_space(answer, close + kCallClose.size());
        if (!answer.substr(pos).starts_with(kCallOpen)) break;
    }
    const bool any_complete = !scan.calls.empty() && scan.calls.front().complete;
    if (partial || any_complete) scan.section = scan.decided = trim_chat_space_end(answer, first);
    if (!partial && !any_complete) scan.calls.clear();
    return scan;
}

}  // namespace ds4

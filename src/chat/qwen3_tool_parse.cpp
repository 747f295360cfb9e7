// Qwen3's tool calls (the Hermes format its template teaches):
//   <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>
// one element per call, separated by a newline. The arguments are reported
// as the model wrote them (the template prints string arguments verbatim,
// so a client that sends them back re-renders the same bytes); see
// chat/tool_calls.h for the section and streaming rules.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "chat/python_json.h"
#include "chat/text_scan.h"
#include "chat/tool_calls.h"

namespace ds4 {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

// Where the JSON object starting at s[pos] ('{') ends: the index after its
// closing brace, or npos while it is still open. Braces inside strings do
// not count.
size_t object_end(std::string_view s, size_t pos) {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (size_t i = pos; i < s.size(); ++i) {
        const char c = s[i];
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            ++depth;
        } else if ((c == '}' || c == ']') && --depth == 0) {
            return i + 1;
        }
    }
    return std::string_view::npos;
}

// The exact text of the "arguments" object in `body`, the spelling the
// model chose, when the call follows the template's order ("name", then
// "arguments": what a stream reports as it arrives), whatever members come
// after it. Empty otherwise, or when it cannot be located unambiguously.
std::string raw_arguments(std::string_view body, const ordered_json& object) {
    auto item = object.items().begin();
    if (object.size() < 2 || item.key() != "name" || (++item).key() != "arguments") return {};
    for (size_t k = body.find("\"arguments\""); k != std::string_view::npos; k = body.find("\"arguments\"", k + 1)) {
        size_t pos = skip_chat_space(body, k + 11);
        if (pos >= body.size() || body[pos] != ':') continue;
        pos = skip_chat_space(body, pos + 1);
        if (pos >= body.size() || body[pos] != '{') continue;
        const size_t end = object_end(body, pos);
        if (end == std::string_view::npos) continue;
        const std::string_view candidate = body.substr(pos, end - pos);
        const ordered_json parsed = ordered_json::parse(candidate, nullptr, false);
        if (!parsed.is_discarded() && parsed == object["arguments"]) return std::string(candidate);
    }
    return {};
}

// One complete element's JSON; false when it is not a call. A member
// written twice ("arguments" or "name") makes it malformed: which one
// counts is a guess (the parser keeps the last, a stream has already
// announced the first), so the element stays text, like any broken call.
// So does a NUL byte: nlohmann's parser takes it for the end of the input
// and would read a call out of the text before it.
bool parse_call(std::string_view body, ToolCallText& call) {
    if (body.find('\0') != std::string_view::npos) return false;
    const size_t from = skip_chat_space(body, 0);
    body = body.substr(from, trim_chat_space_end(body, body.size()) - from);
    std::vector<std::string> keys;  // the call object's own members
    bool repeated = false;
    const ordered_json object = ordered_json::parse(
        body,
        [&](int depth, ordered_json::parse_event_t event, ordered_json& parsed) {
            if (depth == 1 && event == ordered_json::parse_event_t::key) {
                const std::string key = parsed.get<std::string>();
                repeated = repeated || std::find(keys.begin(), keys.end(), key) != keys.end();
                keys.push_back(key);
            }
            return true;
        },
        false);
    if (object.is_discarded() || !object.is_object() || repeated) return false;
    const auto name = object.find("name");
    const auto args = object.find("arguments");
    if (name == object.end() || !name->is_string() || name->get<std::string>().empty()) return false;
    call.name = name->get<std::string>();
    call.complete = true;
    if (args == object.end()) {
        call.arguments = "{}";  // a call without parameters
        return true;
    }
    if (args->is_string()) {
        // Arguments written as a JSON string holding the object.
        const ordered_json inner = ordered_json::parse(args->get<std::string>(), nullptr, false);
        if (inner.is_discarded() || !inner.is_object()) return false;
        call.arguments = args->get<std::string>();
        return true;
    }
    if (!args->is_object()) return false;
    call.arguments = raw_arguments(body, object);
    if (call.arguments.empty()) call.arguments = python_json_dumps(*args);
    return true;
}

// A call still arriving: its name once the text has passed it, and the
// arguments so far when the template's own order ("name" first, then an
// "arguments" object) is followed: the whole object once it is closed
// (members after it do not belong to it), else what came so far without
// trailing whitespace, so they stay a prefix of what parse_call reports.
bool partial_call(std::string_view s, ToolCallText& call) {
    auto expect = [&](size_t& pos, std::string_view token) {
        pos = skip_chat_space(s, pos);
        if (s.substr(pos, token.size()) != token) return false;
        pos += token.size();
        return true;
    };
    size_t pos = 0;
    if (!expect(pos, "{") || !expect(pos, "\"name\"") || !expect(pos, ":") || !expect(pos, "\"")) return false;
    const size_t end = s.find('"', pos);
    if (end == std::string_view::npos) return false;
    const std::string_view name = s.substr(pos, end - pos);
    if (name.empty() || name.find('\\') != std::string_view::npos) return false;  // escapes: wait for the whole call
    call.name = std::string(name);
    call.complete = false;
    pos = end + 1;
    if (!expect(pos, ",") || !expect(pos, "\"arguments\"") || !expect(pos, ":")) return true;
    pos = skip_chat_space(s, pos);
    if (pos >= s.size() || s[pos] != '{') return true;
    std::string_view args = s.substr(pos);
    const size_t closed = object_end(args, 0);
    if (closed != std::string_view::npos) args = args.substr(0, closed);
    else args = args.substr(0, trim_chat_space_end(args, args.size()));
    call.arguments = std::string(args);
    return true;
}

}  // namespace

ToolCallScan scan_qwen3_tool_calls(std::string_view answer, bool partial) {
    ToolCallScan scan;
    scan.section = scan.decided = answer.size();
    const size_t first = answer.find(kOpen);
    if (first == std::string_view::npos) {
        if (partial) scan.decided = trim_chat_space_end(answer, answer.size() - partial_suffix(answer, kOpen));
        return scan;
    }
    size_t pos = first;
    for (;;) {
        const size_t body = pos + kOpen.size();
        const size_t close = answer.find(kClose, body);
        if (close == std::string_view::npos) {
            ToolCallText call;
            if (partial && partial_call(answer.substr(body), call)) scan.calls.push_back(std::move(call));
            break;
        }
        ToolCallText call;
        if (!parse_call(answer.substr(body, close - body), call)) break;
        scan.calls.push_back(std::move(call));
        pos = skip_chat_space(answer, close + kClose.size());
        if (!answer.substr(pos).starts_with(kOpen)) break;
    }
    const bool any_complete = !scan.calls.empty() && scan.calls.front().complete;
    if (partial || any_complete) scan.section = scan.decided = trim_chat_space_end(answer, first);
    if (!partial && !any_complete) scan.calls.clear();
    return scan;
}

}  // namespace ds4

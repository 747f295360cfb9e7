// The family dispatch of tool-call scanning, and DeepSeek V4's scanner on
// top of the DSML parser (chat/dsml_parse.h).
#include "chat/tool_calls.h"

#include "chat/chat_family.h"
#include "chat/dsml.h"
#include "chat/dsml_parse.h"
#include "chat/python_json.h"

namespace ds4 {
namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t trim_end(std::string_view s, size_t end) {
    while (end > 0 && is_space(s[end - 1])) --end;
    return end;
}

size_t partial_suffix(std::string_view text, std::string_view token) {
    for (size_t n = std::min(text.size(), token.size() - 1); n > 0; --n)
        if (text.substr(text.size() - n) == token.substr(0, n)) return n;
    return 0;
}

// DSML: the calls of every well-formed block from the first one on. While
// streaming, an invoke is announced once its name is written; its
// arguments come in one piece when it is finished (its parameters are
// typed JSON values only then).
ToolCallScan scan_dsml_tool_calls(std::string_view answer, bool partial) {
    static const std::string open = "<" + std::string(kDsmlToken) + "tool_calls>";
    ToolCallScan scan;
    scan.section = scan.decided = answer.size();
    const size_t first = answer.find(open);
    if (first == std::string_view::npos) {
        if (partial) scan.decided = trim_end(answer, answer.size() - partial_suffix(answer, open));
        return scan;
    }
    const DsmlOutput out = parse_dsml_output(answer.substr(first), /*thinking=*/false, partial);
    for (const DsmlToolCall& call : out.tool_calls)
        scan.calls.push_back({call.name, python_json_dumps(call.arguments), true});
    if (partial && out.status == DsmlStatus::incomplete) {
        // An invoke still being written after the finished ones: its name.
        static const std::string invoke = "<" + std::string(kDsmlToken) + "invoke name=\"";
        static const std::string invoke_end = "</" + std::string(kDsmlToken) + "invoke>";
        const std::string_view block = answer.substr(first);
        const size_t last_open = block.rfind(invoke);
        const size_t last_close = block.rfind(invoke_end);
        if (last_open != std::string_view::npos && (last_close == std::string_view::npos || last_close < last_open)) {
            const size_t name_at = last_open + invoke.size();
            const size_t quote = block.find('"', name_at);
            if (quote != std::string_view::npos && quote > name_at)
                scan.calls.push_back({std::string(block.substr(name_at, quote - name_at)), "", false});
        }
    }
    if (partial || !scan.calls.empty()) scan.section = scan.decided = trim_end(answer, first);
    return scan;
}

}  // namespace

ToolCallSyntax tool_call_syntax(std::string_view template_name) {
    for (const ChatFamily* f : chat_families())
        for (const ChatRenderer& r : f->renderers)
            if (r.name == template_name) return f->tool_calls;
    return ToolCallSyntax::none;
}

std::string forced_tool_call_opening(ToolCallSyntax syntax, const std::string& name, bool opens_thinking,
                                     std::string_view think_close) {
    const std::string close(think_close);
    const std::string t(kDsmlToken);
    switch (syntax) {
        case ToolCallSyntax::qwen3:
            // As the template writes a turn: "</think>\n\n", then the call.
            return (opens_thinking ? close + "\n\n" : "") + "<tool_call>\n{\"name\": \"" +
                   (name.empty() ? "" : name + "\", \"arguments\": ");
        case ToolCallSyntax::dsml:
            // "</think>" + content (none) + the block's "\n\n".
            return (opens_thinking ? close : "") + "\n\n<" + t + "tool_calls>\n<" + t + "invoke name=\"" +
                   (name.empty() ? "" : name + "\">\n");
        case ToolCallSyntax::none: break;
    }
    return "";
}

ToolCallScan scan_tool_calls(ToolCallSyntax syntax, std::string_view answer, bool partial) {
    switch (syntax) {
        case ToolCallSyntax::qwen3: return scan_qwen3_tool_calls(answer, partial);
        case ToolCallSyntax::dsml: return scan_dsml_tool_calls(answer, partial);
        case ToolCallSyntax::none: break;
    }
    ToolCallScan scan;
    scan.section = scan.decided = answer.size();
    return scan;
}

}  // namespace ds4

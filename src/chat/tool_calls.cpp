// The family dispatch of tool-call scanning, and DeepSeek V4's scanner on
// top of the DSML parser (chat/dsml_parse.h).
#include "chat/tool_calls.h"

#include "chat/chat_family.h"
#include "chat/dsml.h"
#include "chat/dsml_parse.h"
#include "chat/python_json.h"
#include "chat/text_scan.h"

namespace ds4 {
namespace {

const std::string& invoke_tag() {
    static const std::string s = "<" + std::string(kDsmlToken) + "invoke name=\"";
    return s;
}
const std::string& invoke_end_tag() {
    static const std::string s = "</" + std::string(kDsmlToken) + "invoke>";
    return s;
}

// The arguments of an unfinished invoke (`invoke` runs from its tag to the
// end of the text) as far as its parameters are finished: the invoke cut
// after its last closed parameter, closed, and parsed; its Python-style
// JSON without the final '}' is a prefix of the whole call's, since an
// object's dump is "{" + its members in order + "}". "" before the first
// parameter closes.
std::string arguments_so_far(std::string_view invoke) {
    static const std::string param_end = "</" + std::string(kDsmlToken) + "parameter>";
    const size_t last = invoke.rfind(param_end);
    if (last == std::string_view::npos) return "";
    const std::string t(kDsmlToken);
    const std::string whole = "<" + t + "tool_calls>\n" + std::string(invoke.substr(0, last + param_end.size())) + "\n" +
                              invoke_end_tag() + "\n</" + t + "tool_calls>";
    const DsmlOutput out = parse_dsml_output(whole, /*thinking=*/false, /*partial=*/false);
    if (out.status != DsmlStatus::complete || out.tool_calls.size() != 1) return "";
    std::string args = python_json_dumps(out.tool_calls[0].arguments);
    args.pop_back();  // the '}' more parameters may precede
    return args;
}

// DSML: the calls of every well-formed block from the first one on. While
// streaming, an invoke is announced once its name is written, and its
// arguments grow by each parameter as that parameter closes (values are
// typed JSON only then).
ToolCallScan scan_dsml_tool_calls(std::string_view answer, bool partial) {
    static const std::string open = "<" + std::string(kDsmlToken) + "tool_calls>";
    ToolCallScan scan;
    scan.section = scan.decided = answer.size();
    const size_t first = answer.find(open);
    if (first == std::string_view::npos) {
        if (partial) scan.decided = trim_chat_space_end(answer, answer.size() - partial_suffix(answer, open));
        return scan;
    }
    const DsmlOutput out = parse_dsml_output(answer.substr(first), /*thinking=*/false, partial);
    for (const DsmlToolCall& call : out.tool_calls)
        scan.calls.push_back({call.name, python_json_dumps(call.arguments), true});
    if (partial && out.status == DsmlStatus::incomplete) {
        // An invoke still being written after the finished ones: its name,
        // and its finished parameters as the start of its arguments.
        const std::string_view block = answer.substr(first);
        const size_t last_open = block.rfind(invoke_tag());
        const size_t last_close = block.rfind(invoke_end_tag());
        if (last_open != std::string_view::npos && (last_close == std::string_view::npos || last_close < last_open)) {
            const size_t name_at = last_open + invoke_tag().size();
            const size_t quote = block.find('"', name_at);
            if (quote != std::string_view::npos && quote > name_at)
                scan.calls.push_back({std::string(block.substr(name_at, quote - name_at)),
                                      arguments_so_far(block.substr(last_open)), false});
        }
    }
    if (partial || !scan.calls.empty()) scan.section = scan.decided = trim_chat_space_end(answer, first);
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
                                     std::string_view think_close, bool closes_thinking) {
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
        case ToolCallSyntax::glm46:
            // GLM-4.6's prompt never opens reasoning; in thinking mode the
            // model writes its block first, so the template's form of a turn
            // without reasoning comes first: "\n<think></think>" (no-think
            // prompts end with it already). Then the call on its own line,
            // the name followed by a newline.
            return (closes_thinking ? "" : "\n<think></think>") + std::string("\n<tool_call>") +
                   (name.empty() ? "" : name + "\n");
        case ToolCallSyntax::glm47:
            // "</think>" + content (none) + the call, all tight.
            return (opens_thinking ? close : "") + "<tool_call>" + name;
        case ToolCallSyntax::none: break;
    }
    return "";
}

ToolCallScan scan_tool_calls(ToolCallSyntax syntax, std::string_view answer, bool partial,
                             const ToolParamTypes& types) {
    switch (syntax) {
        case ToolCallSyntax::qwen3: return scan_qwen3_tool_calls(answer, partial);
        case ToolCallSyntax::dsml: return scan_dsml_tool_calls(answer, partial);
        case ToolCallSyntax::glm46:
        case ToolCallSyntax::glm47: return scan_glm_tool_calls(answer, partial, types);
        case ToolCallSyntax::none: break;
    }
    ToolCallScan scan;
    scan.section = scan.decided = answer.size();
    return scan;
}

}  // namespace ds4

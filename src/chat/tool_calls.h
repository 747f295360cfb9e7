// Finding the tool calls in a model's answer (the reply after any reasoning
// block), in the family's own syntax:
//   Qwen3:       <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   DeepSeek V4: \n\n<｜DSML｜tool_calls> ... </｜DSML｜tool_calls> (chat/dsml_parse.h)
//   GLM:         <tool_call>f<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>
//                (GLM-4.5/4.6 put a newline after the name and each tag pair)
//
// The answer splits in two: the content (text before the first call, its
// trailing whitespace left out) and the tool-call section (everything after
// the content, byte for byte). The section is what a caller remembers and
// hands back as ChatMessage::sampled_tool_calls, so that re-rendering the
// turn repeats exactly what was sampled.
//
// While a reply streams (`partial`), the last call may still be arriving:
// it is reported with complete = false, its name once known and its
// arguments so far as a prefix of the text they will finally be (Qwen3: as
// written; DSML and GLM: up to the last closed parameter), so a stream can
// send argument deltas it never has to take back.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ds4 {

enum class ToolCallSyntax {
    none,       // no tools: the answer is all content
    qwen3,      // <tool_call> JSON </tool_call> (Hermes style)
    dsml,       // DeepSeek V4's DSML block
    glm46,      // GLM-4.5/4.6: <tool_call>NAME\n<arg_key>..</arg_key>\n<arg_value>..</arg_value>\n</tool_call>
    glm47,      // GLM-4.7 and later: the same elements without the newlines
};

// What a scanner may know about the offered tools: for GLM, whose argument
// values are text, which parameters are strings (the value is kept as
// written) and which are JSON (numbers, objects, ...). Built from the
// request's tool specs (ChatOptions::tools' JSON array); empty: no schemas.
class ToolParamTypes {
public:
    ToolParamTypes() = default;
    // Never throws: specs that are not a JSON array of tools give no types.
    explicit ToolParamTypes(const std::string& specs_json);
    enum class Kind { unknown, string, json };
    // unknown when the tool or the parameter is not in the specs or its
    // schema names no type.
    Kind kind(std::string_view function, std::string_view param) const;

private:
    std::vector<std::pair<std::string, std::vector<std::pair<std::string, Kind>>>> functions_;
};

// The syntax of the family whose renderer is `template_name` (none for
// "raw" and unknown names).
ToolCallSyntax tool_call_syntax(std::string_view template_name);

struct ToolCallText {
    std::string name;
    // The arguments as a JSON object's text: as the model wrote them where
    // that is recoverable (Qwen3), else Python-style JSON
    // (chat/python_json.h), the spelling the templates print.
    std::string arguments;
    bool complete = false;
};

struct ToolCallScan {
    // Where the tool-call section begins in the answer (the content's end):
    // after the content's trailing whitespace. answer.size() when there is
    // no section.
    size_t section = 0;
    // Partial only: content before this offset is decided; text after it
    // may still become the start of a call (a tag cut across pieces).
    size_t decided = 0;
    std::vector<ToolCallText> calls;
};

// Never throws. Whole answers (`partial` false) report complete calls only;
// a malformed or unfinished block ends the calls (the calls before it
// stand, the block stays in the section); no well-formed call at all means
// no section: the whole answer is content.
ToolCallScan scan_tool_calls(ToolCallSyntax syntax, std::string_view answer, bool partial,
                             const ToolParamTypes& types = {});

// The opening a reply is given when the request demands a call (OpenAI's
// tool_choice "required" or a named function, Anthropic's "any" / "tool"):
// the prompt continues past the point where the model chooses between text
// and a call, so it must write a call, and with `name` set a call of that
// function. Without constrained decoding this is the honest way to force
// one: the reply is the model's own continuation of the call's opening.
// A reasoning block the prompt opened is closed first (a call inside
// reasoning is not a call); `closes_thinking`: the prompt ends with the
// close marker already (a no-think pre-fill), so no reasoning block of the
// reply's own comes first. "" for ToolCallSyntax::none.
std::string forced_tool_call_opening(ToolCallSyntax syntax, const std::string& name, bool opens_thinking,
                                     std::string_view think_close, bool closes_thinking = false);

// The Qwen3 scanner (chat/qwen3_tool_parse.cpp), exposed for its tests.
ToolCallScan scan_qwen3_tool_calls(std::string_view answer, bool partial);
// The GLM scanner (chat/glm_tool_parse.cpp), for both spacings: whitespace
// between the elements is accepted wherever the templates put newlines.
// A value is a string where `types` says so, JSON where it says JSON and
// parses, and otherwise JSON when it parses as JSON, else a string.
ToolCallScan scan_glm_tool_calls(std::string_view answer, bool partial, const ToolParamTypes& types);

}  // namespace ds4

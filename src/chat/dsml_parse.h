// Reading DeepSeek V4's output back into reasoning, text and tool calls.
//
// After the generation prompt (which ends in <think> or </think>) the model
// writes [reasoning</think>]content, optionally followed by tool calls in the
// DSML block its chat template uses for assistant tool calls:
//
//   \n\n<｜DSML｜tool_calls>
//   <｜DSML｜invoke name="get_weather">
//   <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
//   <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
//   </｜DSML｜invoke>
//   </｜DSML｜tool_calls><｜end▁of▁sentence｜>
//
// string="true" values are raw text; string="false" values are JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace ds4 {

struct DsmlToolCall {
    std::string name;
    nlohmann::ordered_json arguments = nlohmann::ordered_json::object();  // parameters in the order written
};

enum class DsmlStatus {
    complete,    // everything parsed
    incomplete,  // (partial only) the text ends inside a tag or block: wait for more
    malformed,   // a tool-call block is broken: its text is in `content`, `error` says why
                 // (wins over incomplete: more text cannot repair it)
};

struct DsmlOutput {
    DsmlStatus status = DsmlStatus::complete;
    std::string reasoning_content;
    // Text outside tool-call blocks. The "\n\n" the template puts before a
    // block is not part of it; a tag that may still be arriving (partial) is
    // held back.
    std::string content;
    // Calls from well-formed blocks; while incomplete, the invokes finished so far.
    std::vector<DsmlToolCall> tool_calls;
    std::string error;  // one sentence, set when malformed
};

// Parses `text`, the model's output after the generation prompt. `thinking`:
// the prompt ended in <think>, so the output starts with reasoning that runs
// up to </think>. `partial`: generation is still running, so text ending
// inside a tag or block is `incomplete` rather than malformed (and reasoning
// without </think> is incomplete rather than all reasoning). A trailing
// <｜end▁of▁sentence｜> text is ignored. Never throws on any input.
DsmlOutput parse_dsml_output(std::string_view text, bool thinking, bool partial);

}  // namespace ds4

// A model's reply read as it streams: reasoning (chat/thinking.h), then the
// answer, split into content and tool calls (chat/tool_calls.h). Tool calls
// are only looked for in the answer: a call written inside a reasoning block
// is reasoning, not a call.
//
// Deltas are final: content and arguments are held back while what follows
// may still change them (a tag cut across pieces, whitespace before a call),
// so the concatenated deltas equal the whole reply's parts, and a streamed
// reply gives what the same text gives whole. One exception, as in any
// API that streams calls: a call is announced once its name is written,
// so a call that never closes (the reply is cut off by max_tokens, or the
// call turns out malformed) stays announced in the stream, while the whole
// reply holds it as content (the stream sends that content at the end).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/thinking.h"
#include "chat/tool_calls.h"

namespace ds4 {

struct ReplyDelta {
    enum class Kind { reasoning, content, call_start, call_arguments };
    Kind kind;
    size_t call = 0;   // call_start / call_arguments: the call's index in the reply
    std::string text;  // the text added; call_start: the function's name
};

struct Reply {
    std::string reasoning;
    std::string content;  // the answer before the first call (all of it when there is none)
    std::vector<ToolCallText> tool_calls;
    // The exact answer text after `content` when there are calls (chat.h:
    // ChatMessage::sampled_tool_calls), "" otherwise.
    std::string tool_section;
};

class ReplyParser {
public:
    // `markers` / `opens_thinking` as for ThinkingSplitter; `syntax` none:
    // the answer is all content; `types`: the offered tools' parameter
    // types (GLM's argument values are text: chat/tool_calls.h).
    ReplyParser(std::optional<ThinkMarkers> markers, bool opens_thinking, ToolCallSyntax syntax,
                ToolParamTypes types = {});

    std::vector<ReplyDelta> push(std::string_view text);
    // The reply ended: what was held back, the calls' final state.
    std::vector<ReplyDelta> finish();
    // The whole reply; complete once finish() has been called.
    const Reply& reply() const { return reply_; }
    // Where the answer begins in the text pushed so far (its first byte's
    // offset; whitespace after a reasoning block's close marker comes
    // before it), or npos until some of the answer has been decided. The
    // content is the answer's prefix, so its bytes sit at this offset on:
    // a caller that knows each token's bytes can tell which tokens wrote
    // it (the Responses API's output_text log probabilities).
    size_t answer_offset() const { return answer_offset_; }

private:
    void answer(std::string_view text, std::vector<ReplyDelta>& out);
    void content_to(std::string_view content, std::vector<ReplyDelta>& out);
    void calls_to(const std::vector<ToolCallText>& calls, std::vector<ReplyDelta>& out);

    ThinkingSplitter split_;
    ToolCallSyntax syntax_;
    ToolParamTypes types_;
    std::string raw_;                      // every byte pushed (the answer is its suffix)
    std::string answer_;                   // the answer so far
    size_t answer_offset_ = std::string::npos;  // answer_'s first byte in raw_
    size_t content_sent_ = 0;              // bytes of content sent
    std::vector<std::string> args_sent_;   // per started call: its arguments sent
    Reply reply_;
};

}  // namespace ds4

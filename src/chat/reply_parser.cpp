#include "chat/reply_parser.h"

namespace ds4 {

namespace {

// Whether the whitespace between a reasoning block and a call that follows
// it directly belongs to the call section. DeepSeek V4's template writes
// "</think>" + content + "\n\n<｜DSML｜tool_calls>", and GLM's "</think>" +
// content + "\n<tool_call>" (4.6; nothing in 4.7): with no content, the
// whitespace after the reasoning (which the splitter drops from the answer)
// is the section's own separator, so the sampled section keeps it. Qwen3's
// template writes its own "\n</think>\n\n", so there the gap is not part
// of the section.
bool section_owns_gap(ToolCallSyntax syntax) {
    return syntax == ToolCallSyntax::dsml || syntax == ToolCallSyntax::glm46 || syntax == ToolCallSyntax::glm47;
}

}  // namespace

ReplyParser::ReplyParser(std::optional<ThinkMarkers> markers, bool opens_thinking, ToolCallSyntax syntax,
                         ToolParamTypes types)
    : split_(markers, opens_thinking), syntax_(syntax), types_(std::move(types)) {}

void ReplyParser::content_to(std::string_view content, std::vector<ReplyDelta>& out) {
    // Sent content is never taken back: only a longer content that extends
    // it is sent (the scanners only ever decide more of it).
    if (content.size() <= content_sent_) return;
    out.push_back({ReplyDelta::Kind::content, 0, std::string(content.substr(content_sent_))});
    content_sent_ = content.size();
}

void ReplyParser::calls_to(const std::vector<ToolCallText>& calls, std::vector<ReplyDelta>& out) {
    for (size_t i = 0; i < calls.size(); ++i) {
        const ToolCallText& call = calls[i];
        if (call.name.empty()) break;
        if (i == args_sent_.size()) {
            out.push_back({ReplyDelta::Kind::call_start, i, call.name});
            args_sent_.emplace_back();
        }
        std::string& sent = args_sent_[i];
        if (call.arguments.size() > sent.size() && call.arguments.starts_with(sent)) {
            out.push_back({ReplyDelta::Kind::call_arguments, i, call.arguments.substr(sent.size())});
            sent = call.arguments;
        }
    }
}

void ReplyParser::answer(std::string_view text, std::vector<ReplyDelta>& out) {
    // The splitter hands the answer over once it holds nothing back, so
    // this piece ends where the text pushed so far ends.
    if (answer_offset_ == std::string::npos && !text.empty()) answer_offset_ = raw_.size() - text.size();
    answer_ += text;
    const ToolCallScan scan = scan_tool_calls(syntax_, answer_, /*partial=*/true, types_);
    content_to(std::string_view(answer_).substr(0, scan.decided), out);
    calls_to(scan.calls, out);
}

std::vector<ReplyDelta> ReplyParser::push(std::string_view text) {
    std::vector<ReplyDelta> out;
    raw_ += text;
    for (const ThinkingSplitter::Piece& p : split_.push(text)) {
        if (p.part == ThinkingSplitter::Part::thinking) {
            reply_.reasoning += p.text;
            out.push_back({ReplyDelta::Kind::reasoning, 0, p.text});
        } else {
            answer(p.text, out);
        }
    }
    return out;
}

std::vector<ReplyDelta> ReplyParser::finish() {
    std::vector<ReplyDelta> out;
    for (const ThinkingSplitter::Piece& p : split_.finish()) {
        if (p.part == ThinkingSplitter::Part::thinking) {
            reply_.reasoning += p.text;
            out.push_back({ReplyDelta::Kind::reasoning, 0, p.text});
        } else {
            if (answer_offset_ == std::string::npos && !p.text.empty()) answer_offset_ = raw_.size() - p.text.size();
            answer_ += p.text;
        }
    }
    const ToolCallScan scan = scan_tool_calls(syntax_, answer_, /*partial=*/false, types_);
    reply_.content = answer_.substr(0, scan.section);
    reply_.tool_section = scan.calls.empty() ? std::string() : answer_.substr(scan.section);
    reply_.tool_calls = scan.calls;
    if (section_owns_gap(syntax_) && reply_.content.empty() && !reply_.tool_calls.empty()) {
        size_t start = raw_.size() - answer_.size();
        while (start > 0 && (raw_[start - 1] == ' ' || raw_[start - 1] == '\n' || raw_[start - 1] == '\t' ||
                             raw_[start - 1] == '\r'))
            --start;
        reply_.tool_section = raw_.substr(start, raw_.size() - answer_.size() - start) + reply_.tool_section;
    }
    content_to(reply_.content, out);
    calls_to(reply_.tool_calls, out);
    return out;
}

}  // namespace ds4

// DSML tool-call parsing for DeepSeek V4 output; see chat/dsml_parse.h.
#include "chat/dsml_parse.h"

#include <algorithm>

#include "chat/dsml.h"

namespace ds4 {
namespace {

using nlohmann::ordered_json;

std::string tag(std::string_view prefix, std::string_view name) {
    return std::string(prefix) + std::string(kDsmlToken) + std::string(name);
}

const std::string& block_open() { static const std::string s = tag("<", "tool_calls>"); return s; }
const std::string& block_close() { static const std::string s = tag("</", "tool_calls>"); return s; }
const std::string& invoke_open() { static const std::string s = tag("<", "invoke name=\""); return s; }
const std::string& invoke_close() { static const std::string s = tag("</", "invoke>"); return s; }
const std::string& param_open() { static const std::string s = tag("<", "parameter name=\""); return s; }
const std::string& param_close() { static const std::string s = tag("</", "parameter>"); return s; }
constexpr std::string_view kSeparator = "\n\n";  // the template's text between content and a block

// True when `text` ends with a proper, non-empty prefix of `token` that is
// not yet the whole token: the start of `token` may be arriving.
size_t partial_token_suffix(std::string_view text, std::string_view token) {
    for (size_t len = std::min(text.size(), token.size() - 1); len > 0; --len) {
        if (text.substr(text.size() - len) == token.substr(0, len)) return len;
    }
    return 0;
}

// Outcome of one step of the block grammar.
enum class Step { ok, need_more, bad };

struct BlockParser {
    std::string_view text;  // starts right after the block opener
    size_t pos = 0;
    std::vector<DsmlToolCall> calls;
    std::string error;

    void skip_space() {
        while (pos < text.size() && (text[pos] == '\n' || text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\r')) {
            ++pos;
        }
    }
    // Consumes `token` if it is next. need_more when the text ends within it.
    Step expect(std::string_view token) {
        std::string_view rest = text.substr(pos);
        if (rest.starts_with(token)) {
            pos += token.size();
            return Step::ok;
        }
        return token.starts_with(rest) ? Step::need_more : Step::bad;
    }
    bool next_is(std::string_view token) { return text.substr(pos).starts_with(token); }
    bool could_be(std::string_view token) {
        std::string_view rest = text.substr(pos);
        return rest.size() < token.size() && token.starts_with(rest);
    }
    Step fail(std::string message) {
        error = std::move(message);
        return Step::bad;
    }
    // An attribute value up to its closing quote.
    Step attribute(std::string& out, const char* what) {
        size_t end = text.find('"', pos);
        std::string_view value = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
        if (value.find_first_of("\n<>") != std::string_view::npos) {
            return fail(std::string("a tool-call ") + what + " has no closing quote.");
        }
        if (end == std::string_view::npos) return Step::need_more;
        out = std::string(value);
        pos = end + 1;
        return Step::ok;
    }
    Step parameter(DsmlToolCall& call) {
        std::string key;
        if (Step s = attribute(key, "parameter name"); s != Step::ok) return s;
        if (Step s = expect(" string=\""); s != Step::ok) {
            return s == Step::bad ? fail("parameter \"" + key + "\" lacks string=\"true|false\".") : s;
        }
        constexpr std::string_view kTrue = "true\">", kFalse = "false\">";
        std::string_view rest = text.substr(pos);
        bool is_string = rest.starts_with(kTrue);
        if (is_string) {
            pos += kTrue.size();
        } else if (rest.starts_with(kFalse)) {
            pos += kFalse.size();
        } else if (kTrue.starts_with(rest) || kFalse.starts_with(rest)) {
            return Step::need_more;
        } else {
            return fail("parameter \"" + key + "\" has a string attribute other than true or false.");
        }
        size_t end = text.find(param_close(), pos);
        if (end == std::string_view::npos) return Step::need_more;
        std::string_view value = text.substr(pos, end - pos);
        pos = end + param_close().size();
        if (is_string) {
            call.arguments[key] = std::string(value);
            return Step::ok;
        }
        ordered_json parsed = ordered_json::parse(value, nullptr, /*allow_exceptions=*/false);
        if (parsed.is_discarded()) {
            return fail("parameter \"" + key + "\" is marked string=\"false\" but its value is not JSON.");
        }
        call.arguments[key] = std::move(parsed);
        return Step::ok;
    }
    Step invoke() {
        DsmlToolCall call;
        if (Step s = attribute(call.name, "name"); s != Step::ok) return s;
        // A call needs a function to call (a stream never announces a
        // nameless one, so the whole reply must not report one either).
        if (call.name.empty()) return fail("a tool call has an empty name.");
        if (Step s = expect(">"); s != Step::ok) return s == Step::bad ? fail("an invoke tag is not closed by '>'.") : s;
        for (;;) {
            skip_space();
            if (next_is(invoke_close())) {
                pos += invoke_close().size();
                calls.push_back(std::move(call));
                return Step::ok;
            }
            if (next_is(param_open())) {
                pos += param_open().size();
                if (Step s = parameter(call); s != Step::ok) return s;
                continue;
            }
            if (pos == text.size() || could_be(invoke_close()) || could_be(param_open())) return Step::need_more;
            return fail("invoke \"" + call.name + "\" holds text that is neither a parameter nor its end.");
        }
    }
    // The whole block, up to and including its closing tag.
    Step block() {
        for (;;) {
            skip_space();
            if (next_is(block_close())) {
                pos += block_close().size();
                return Step::ok;
            }
            if (next_is(invoke_open())) {
                pos += invoke_open().size();
                if (Step s = invoke(); s != Step::ok) return s;
                continue;
            }
            if (pos == text.size() || could_be(block_close()) || could_be(invoke_open())) return Step::need_more;
            return fail("a tool-call block holds text that is not an invoke.");
        }
    }
};

void strip_separator(std::string& content) {
    if (std::string_view(content).ends_with(kSeparator)) content.resize(content.size() - kSeparator.size());
}

// An earlier malformed block stays the verdict: waiting cannot repair it.
void mark_incomplete(DsmlOutput& out) {
    if (out.status == DsmlStatus::complete) out.status = DsmlStatus::incomplete;
}

// Content with any number of tool-call blocks.
void parse_content(std::string_view text, bool partial, DsmlOutput& out) {
    for (;;) {
        size_t open = text.find(block_open());
        if (open == std::string_view::npos) {
            // A tag that may still be arriving: a block opener, or the
            // end-of-sentence text when a caller streams it.
            size_t held = partial ? std::max(partial_token_suffix(text, block_open()),
                                             partial_token_suffix(text, kEndOfSentence))
                                  : 0;
            out.content += text.substr(0, text.size() - held);
            if (held > 0) mark_incomplete(out);
            return;
        }
        std::string before(text.substr(0, open));
        std::string_view body = text.substr(open + block_open().size());
        BlockParser parser;
        parser.text = body;
        Step step = parser.block();
        if (step == Step::ok) {
            out.content += before;
            strip_separator(out.content);
            for (auto& call : parser.calls) out.tool_calls.push_back(std::move(call));
            text = body.substr(parser.pos);
            continue;
        }
        if (step == Step::need_more && partial) {
            out.content += before;
            strip_separator(out.content);
            for (auto& call : parser.calls) out.tool_calls.push_back(std::move(call));
            mark_incomplete(out);
            return;
        }
        // Malformed (or cut off for good): the block stays text, up to its
        // closing tag if it has one; parsing resumes after that.
        out.status = DsmlStatus::malformed;
        if (out.error.empty()) {
            out.error = step == Step::bad ? parser.error : "the output ends inside a tool-call block.";
        }
        size_t close = body.find(block_close());
        size_t end = close == std::string_view::npos ? body.size() : close + block_close().size();
        out.content += before;
        out.content += block_open();
        out.content += body.substr(0, end);
        text = body.substr(end);
        if (text.empty()) return;
    }
}

}  // namespace

DsmlOutput parse_dsml_output(std::string_view text, bool thinking, bool partial) {
    DsmlOutput out;
    if (text.ends_with(kEndOfSentence)) text.remove_suffix(kEndOfSentence.size());
    if (thinking) {
        constexpr std::string_view kThinkEnd = "</think>";
        size_t end = text.find(kThinkEnd);
        if (end == std::string_view::npos) {
            size_t held = partial ? partial_token_suffix(text, kThinkEnd) : 0;
            out.reasoning_content = std::string(text.substr(0, text.size() - held));
            if (partial) out.status = DsmlStatus::incomplete;
            return out;
        }
        out.reasoning_content = std::string(text.substr(0, end));
        text.remove_prefix(end + kThinkEnd.size());
    }
    parse_content(text, partial, out);
    return out;
}

}  // namespace ds4

// A thinking model's reply is its reasoning inside a pair of markers
// (<think> ... </think> for Qwen3 and DeepSeek V4), then the answer. APIs
// that return the two apart (Anthropic's thinking blocks) need the split as
// the reply streams: a marker can arrive cut across pieces, so text that may
// begin one is held back until the next piece decides.
//
// The reply opens in reasoning when the rendered prompt ends with the open
// marker (DeepSeek V4 in thinking mode, Qwen3-Thinking-2507, GLM-4.7), or
// when the model writes the open marker first (Qwen3's hybrid template,
// GLM-4.6). The
// reasoning is trimmed of surrounding whitespace and the answer of the
// whitespace that follows the close marker, as the templates themselves
// strip them when they render an earlier turn.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ds4 {

struct ThinkMarkers {
    std::string_view open, close;
    // Whitespace before an answer that does not follow a reasoning block
    // is not part of it: for templates that strip the content when they
    // render a turn (GLM), so the model's leading newline is layout.
    bool trim_answer_start = false;
};

// The markers of the family whose renderer is `template_name`; none for
// "raw" or an unknown name (then the whole reply is the answer).
std::optional<ThinkMarkers> think_markers(std::string_view template_name);

// Whether a rendered prompt leaves the reply inside a reasoning block: it
// ends with the open marker, whitespace aside.
bool prompt_opens_thinking(std::string_view prompt, const ThinkMarkers& markers);
// Whether it ends with the close marker, whitespace aside: a no-think
// pre-fill (an empty reasoning block) the reply continues after.
bool prompt_closes_thinking(std::string_view prompt, const ThinkMarkers& markers);

class ThinkingSplitter {
public:
    enum class Part { thinking, answer };
    struct Piece {
        Part part;
        std::string text;
    };

    // No markers: every piece is answer. `in_thinking`: the prompt opened
    // the reasoning block already (prompt_opens_thinking).
    ThinkingSplitter(std::optional<ThinkMarkers> markers, bool in_thinking);

    // Appends reply text; returns what is now decided, in order (empty
    // pieces left out).
    std::vector<Piece> push(std::string_view text);
    // At the end of the reply: what was held back (a reasoning block that
    // never closed ends the reply as reasoning).
    std::vector<Piece> finish();

private:
    enum class State { start, thinking, after_close, answer };
    void emit(std::vector<Piece>& out, Part part, std::string text);

    std::optional<ThinkMarkers> markers_;
    State state_;
    std::string held_;         // undecided text
    bool thinking_said_ = false;  // some reasoning was emitted (leading whitespace is trimmed)
};

}  // namespace ds4

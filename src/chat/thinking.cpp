#include "chat/thinking.h"

#include "chat/chat_family.h"
#include "chat/text_scan.h"

namespace ds4 {

namespace {

size_t leading_space(std::string_view s) {
    size_t i = 0;
    while (i < s.size() && is_chat_space(s[i])) ++i;
    return i;
}

std::string_view trim_right(std::string_view s) {
    while (!s.empty() && is_chat_space(s.back())) s.remove_suffix(1);
    return s;
}

// Where the text that may still turn into `marker` begins: the longest
// suffix that is a proper prefix of the marker, with the whitespace before
// it (reasoning is trimmed, so trailing whitespace waits for what follows).
size_t undecided_from(std::string_view s, std::string_view marker) {
    size_t from = s.size();
    for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
        if (s.substr(s.size() - n) == marker.substr(0, n)) {
            from = s.size() - n;
            break;
        }
    while (from > 0 && is_chat_space(s[from - 1])) --from;
    return from;
}

}  // namespace

std::optional<ThinkMarkers> think_markers(std::string_view template_name) {
    for (const ChatFamily* f : chat_families())
        for (const ChatRenderer& r : f->renderers)
            if (r.name == template_name) return f->think;
    return std::nullopt;
}

bool prompt_opens_thinking(std::string_view prompt, const ThinkMarkers& markers) {
    return trim_right(prompt).ends_with(markers.open);
}

bool prompt_closes_thinking(std::string_view prompt, const ThinkMarkers& markers) {
    return trim_right(prompt).ends_with(markers.close);
}

ThinkingSplitter::ThinkingSplitter(std::optional<ThinkMarkers> markers, bool in_thinking)
    : markers_(markers), state_(!markers ? State::answer : in_thinking ? State::thinking : State::start) {}

void ThinkingSplitter::emit(std::vector<Piece>& out, Part part, std::string text) {
    if (text.empty()) return;
    if (part == Part::thinking) thinking_said_ = true;
    out.push_back(Piece{part, std::move(text)});
}

std::vector<ThinkingSplitter::Piece> ThinkingSplitter::push(std::string_view text) {
    std::vector<Piece> out;
    held_ += text;
    for (;;) {
        switch (state_) {
            case State::start: {
                // Only an open marker before anything but whitespace opens
                // reasoning; anything else makes the whole reply the answer.
                const std::string_view rest = std::string_view(held_).substr(leading_space(held_));
                if (rest.starts_with(markers_->open)) {
                    held_.erase(0, held_.size() - rest.size() + markers_->open.size());
                    state_ = State::thinking;
                    continue;
                }
                if (markers_->open.starts_with(rest)) return out;  // undecided
                if (markers_->trim_answer_start) held_.erase(0, held_.size() - rest.size());
                state_ = State::answer;
                continue;
            }
            case State::thinking: {
                if (!thinking_said_) held_.erase(0, leading_space(held_));
                if (const size_t at = held_.find(markers_->close); at != std::string::npos) {
                    emit(out, Part::thinking, std::string(trim_right(std::string_view(held_).substr(0, at))));
                    held_.erase(0, at + markers_->close.size());
                    state_ = State::after_close;
                    continue;
                }
                const size_t from = undecided_from(held_, markers_->close);
                emit(out, Part::thinking, held_.substr(0, from));
                held_.erase(0, from);
                return out;
            }
            case State::after_close:
                held_.erase(0, leading_space(held_));
                if (held_.empty()) return out;
                state_ = State::answer;
                continue;
            case State::answer:
                emit(out, Part::answer, std::move(held_));
                held_.clear();
                return out;
        }
    }
}

std::vector<ThinkingSplitter::Piece> ThinkingSplitter::finish() {
    std::vector<Piece> out;
    if (state_ == State::start)
        emit(out, Part::answer, markers_->trim_answer_start ? held_.substr(leading_space(held_)) : std::move(held_));
    if (state_ == State::thinking) emit(out, Part::thinking, std::string(trim_right(held_)));
    held_.clear();
    return out;
}

}  // namespace ds4

// Small scanning helpers the reply parsers share (thinking blocks, tool
// calls of each family): whitespace as the chat templates write it, and how
// much of a marker a streamed text may have begun.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace ds4 {

inline bool is_chat_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

inline size_t skip_chat_space(std::string_view s, size_t pos) {
    while (pos < s.size() && is_chat_space(s[pos])) ++pos;
    return pos;
}

// The end of s[0, end) without its trailing whitespace.
inline size_t trim_chat_space_end(std::string_view s, size_t end) {
    while (end > 0 && is_chat_space(s[end - 1])) --end;
    return end;
}

// The length of the longest proper prefix of `token` that ends `text`: a
// marker the next streamed piece may complete.
inline size_t partial_suffix(std::string_view text, std::string_view token) {
    for (size_t n = std::min(text.size(), token.size() - 1); n > 0; --n)
        if (text.substr(text.size() - n) == token.substr(0, n)) return n;
    return 0;
}

}  // namespace ds4

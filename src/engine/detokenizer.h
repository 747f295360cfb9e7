// Streaming detokenizer: token ids in, text out, never half a character.
// A UTF-8 character can span several byte-level tokens; push() holds back a
// trailing incomplete sequence until the tokens that finish it arrive, so a
// terminal or an SSE stream only ever sees whole characters.
#pragma once

#include <cstdint>
#include <string>

namespace ds4 {

class Tokenizer;

class Detokenizer {
public:
    explicit Detokenizer(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

    // The token's bytes appended to what was held back; returns the longest
    // prefix that ends on a character boundary.
    std::string push(int32_t token);
    // Whatever is still held back (an incomplete sequence at the very end).
    std::string flush();

private:
    const Tokenizer& tokenizer_;
    std::string pending_;
};

// Bytes of `text` from its start up to the last character boundary (a
// trailing incomplete UTF-8 sequence of up to 3 bytes is left out).
size_t complete_utf8_prefix(const std::string& text);

}  // namespace ds4

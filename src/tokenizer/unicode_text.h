// UTF-8 as the GGUF tokenizers see it. Decoding mirrors llama.cpp's lenient
// decoder (overlong forms and surrogates are accepted as code points; a byte
// that cannot start a sequence becomes U+FFFD), so that ds4 splits malformed
// text into the same tokens llama.cpp does instead of rejecting it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ds4 {

// Code points of `text`; every invalid byte becomes one U+FFFD. Code points
// above U+10FFFF (4-byte forms F4 90.. and F5..F7) are invalid here too:
// llama.cpp would throw on them, ds4 replaces them.
std::vector<uint32_t> utf8_decode_lenient(std::string_view text);

// Appends the UTF-8 form of cp (cp <= 0x10FFFF; surrogates are encoded as
// their 3-byte form, as llama.cpp does).
void utf8_append(std::string& out, uint32_t cp);

// GPT-2 byte-level alphabet: each byte maps to one printable code point.
uint32_t byte_to_unicode(uint8_t b);
// Inverse mapping; -1 when cp is not one of the 256 alphabet code points.
int unicode_to_byte(uint32_t cp);

// The byte-level form of raw bytes (what a byte-level BPE vocabulary stores).
std::string byte_level_encode(std::string_view bytes);
// Raw bytes of a byte-level string; code points outside the alphabet are
// kept as their UTF-8 (a malformed vocabulary entry still decodes to text).
std::string byte_level_decode(std::string_view text);

}  // namespace ds4

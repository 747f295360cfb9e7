// Random, varied text for tokenizer oracle tests: code, CJK, emoji and ZWJ
// sequences, combining marks, whitespace runs, numbers, contractions, mixed
// scripts, special tokens, text not in NFC, supplementary-plane characters
// (tokenizer_random_unicode.h) and (optionally) malformed UTF-8.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tokenizer_random_unicode.h"
#include "support/test_seed.h"

namespace ds4::test {

struct RandomTextOptions {
    std::vector<std::string> specials;  // token texts to embed now and then
    bool invalid_utf8 = false;          // raw bytes that are not UTF-8 (never code points above U+10FFFF: llama.cpp throws on those)
    bool nel_and_bom = true;            // U+0085 and U+FEFF (JS \s disagrees with llama.cpp on them)
};

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
        switch (pick(17)) {
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
            case 10: {  // any assigned scalar value (or noncharacter) from the BMP (other planes: append_supplementary)
                uint32_t cp;
                do {
                    cp = range(0x80, 0xFFFF);
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
            case 14: case 15: append_non_nfc(s, rng); break;
            case 16: append_supplementary(s, rng); break;
        }
    }
    return s;
}

// DS4_TEST_SEED re-runs a printed seed (tests/support/test_seed.h).
inline uint64_t fresh_seed() { return ds4::test::test_seed(); }

}  // namespace ds4::test

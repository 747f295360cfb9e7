// The streaming detokenizer never emits half a UTF-8 character, whatever
// the byte split between tokens, and loses no byte: the concatenation of
// everything it emits is the tokens' bytes. Real Qwen3 vocabulary from
// ds4-gguf synth is not needed: complete_utf8_prefix is the rule, checked
// here on random splits of random UTF-8 text (fresh seed each run).
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "engine/detokenizer.h"
#include "support/test_seed.h"
#include "support/utf8.h"

namespace ds4 {
namespace {

using ds4::test::append_utf8;

bool valid_utf8(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
        if (n == 0 || i + n > s.size()) return false;
        for (size_t j = 1; j < n; ++j)
            if ((static_cast<unsigned char>(s[i + j]) & 0xC0) != 0x80) return false;
        i += n;
    }
    return true;
}

TEST(Detokenizer, CompletePrefixCutsOnlyIncompleteTails) {
    EXPECT_EQ(complete_utf8_prefix(""), 0u);
    EXPECT_EQ(complete_utf8_prefix("ab"), 2u);
    EXPECT_EQ(complete_utf8_prefix("a\xC3"), 1u);          // é's lead byte alone
    EXPECT_EQ(complete_utf8_prefix("a\xC3\xA9"), 3u);      // é whole
    EXPECT_EQ(complete_utf8_prefix("\xF0\x9F\x98"), 0u);   // 3 of an emoji's 4 bytes
    EXPECT_EQ(complete_utf8_prefix("\xF0\x9F\x98\x80"), 4u);
}

TEST(Detokenizer, RandomSplitsEmitWholeCharactersAndLoseNothing) {
    const uint64_t seed = ds4::test::test_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    for (int round = 0; round < 500; ++round) {
        std::string text;
        const int chars = 1 + int(rng() % 40);
        for (int i = 0; i < chars; ++i) {
            const int kind = int(rng() % 4);
            char32_t cp = kind == 0 ? 0x20 + rng() % 0x5F : kind == 1 ? 0x80 + rng() % 0x780
                        : kind == 2 ? 0x800 + rng() % 0xD000 : 0x10000 + rng() % 0xFFFF;
            append_utf8(text, cp);
        }
        // Feed the bytes in random pieces, as byte-level tokens would come.
        std::string pending, emitted;
        for (size_t at = 0; at < text.size();) {
            const size_t n = std::min(text.size() - at, size_t(1 + rng() % 5));
            pending += text.substr(at, n);
            at += n;
            const size_t cut = complete_utf8_prefix(pending);
            const std::string out = pending.substr(0, cut);
            pending.erase(0, cut);
            EXPECT_TRUE(valid_utf8(out)) << "emitted a partial character";
            emitted += out;
        }
        EXPECT_TRUE(pending.empty());
        EXPECT_EQ(emitted, text);
    }
}

}  // namespace
}  // namespace ds4

// The streaming detokenizer on real byte-level vocabularies (llama.cpp's
// vocab-only Qwen2 and DeepSeek GGUFs): random text with multi-byte and
// supplementary-plane characters, whose tokens often end inside a
// character, is pushed token by token. Every piece emitted is whole UTF-8,
// and their concatenation is the tokenizer's decode of all the ids. Fresh
// seed each run (DS4_TEST_SEED re-runs one).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/detokenizer.h"
#include "gguf/gguf_file.h"
#include "support/test_seed.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_random_text.h"

namespace ds4 {
namespace {

bool whole_utf8(const std::string& s) { return complete_utf8_prefix(s) == s.size(); }

class DetokenizerVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(DetokenizerVocab, PiecesAreWholeCharactersAndAddUpToTheDecode) {
    const uint64_t seed = ds4::test::test_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    const auto file = GgufFile::open(std::string(DS4_ORACLE_DIR) + "/llama.cpp/models/ggml-vocab-" + GetParam() + ".gguf");
    const auto tok = Tokenizer::from_gguf(*file);
    std::mt19937_64 rng(seed);
    size_t split_chars = 0;
    for (int round = 0; round < 200; ++round) {
        test::RandomTextOptions opt;
        const std::string text = test::random_text(rng, opt);
        const std::vector<int32_t> ids = tok->encode(text, false);
        Detokenizer detok(*tok);
        std::string all;
        for (int32_t id : ids) {
            const std::string piece = detok.push(id);
            if (piece.empty() && !tok->decode(std::span<const int32_t>(&id, 1)).empty()) ++split_chars;
            EXPECT_TRUE(whole_utf8(piece)) << "token " << id << " emitted part of a character";
            all += piece;
        }
        all += detok.flush();
        EXPECT_EQ(all, tok->decode(ids)) << "text: " << text;
    }
    // The stimulus must actually split characters across tokens.
    EXPECT_GT(split_chars, 0u);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, DetokenizerVocab, ::testing::Values("qwen2", "deepseek-llm"));

}  // namespace
}  // namespace ds4

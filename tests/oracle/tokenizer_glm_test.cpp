// ds4's tokenizer against llama.cpp on the vocabulary `ds4-gguf synth
// --arch glm-dsa` embeds: pre-tokenizer "glm4" (llama.cpp's CHATGLM4
// regex, \p{N}{1,3} digit groups), GLM's special tokens (control tokens
// such as [gMASK] and <|user|>, user-defined tags such as <think> and
// <arg_value> that are found in text even without special parsing), the
// ids llama.cpp's converter sets (bos [gMASK], eot <|user|>, eom
// <|observation|>), padded rows. No GLM vocabulary can be had here, so the
// BPE pieces are the stand-in's (synth/glm_tokenizer.h); what is compared
// is everything ds4 derives from GLM's metadata, and the BPE over it.
//
// Fresh random text every run (mixed scripts, decomposed and combining
// characters, emoji, digit runs, whitespace kinds, invalid UTF-8, the
// special texts), tokenized with and without special parsing by ds4 and by
// llama_tokenize; and the vocabulary facts (end-of-generation set, bos,
// eos, add_bos) id by id.
#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "oracle_harness.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_llama_oracle.h"
#include "tokenizer_random_text.h"

namespace ds4::oracle {
namespace {

class GlmTokenizer : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new TempDir();
        path_ = (*dir_) / "glm.gguf";
        // The smallest weights the tiny preset takes: the vocabulary is the point.
        run_checked({ds4_program("ds4-gguf").string(), "synth", "--arch", "glm-dsa", "--preset", "tiny", "--n-layer",
                     "1", "--type", "q8_0", "--seed", "1", "--out", path_.string()});
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }
    void SetUp() override {
        file_ = GgufFile::open(path_.string());
        tok_ = Tokenizer::from_gguf(*file_);
    }

    static TempDir* dir_;
    static fs::path path_;
    std::unique_ptr<GgufFile> file_;
    std::unique_ptr<Tokenizer> tok_;
};

TempDir* GlmTokenizer::dir_ = nullptr;
fs::path GlmTokenizer::path_;

TEST_F(GlmTokenizer, TheFileCarriesGlmsPreTokenizerAndSpecials) {
    EXPECT_EQ(tok_->pre(), "glm4");
    EXPECT_EQ(tok_->n_vocab(), 154880);
    for (const char* text : {"[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"})
        EXPECT_EQ(tok_->token_type(tok_->token_id(text)), TokenType::CONTROL) << text;
    for (const char* text : {"<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_value>", "/nothink"})
        EXPECT_EQ(tok_->token_type(tok_->token_id(text)), TokenType::USER_DEFINED) << text;
    // The template's opening is two tokens, whatever special parsing says
    // about text: [gMASK] is control, so only parsed as special.
    EXPECT_EQ(tok_->encode("[gMASK]<sop>", true).size(), 2u);
    EXPECT_GT(tok_->encode("[gMASK]<sop>", false).size(), 2u);
}

TEST_F(GlmTokenizer, RandomTextMatchesLlamaCpp) {
    const test::LlamaVocab ref(path_.string());
    const uint64_t seed = test::fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    test::RandomTextOptions opt;
    opt.invalid_utf8 = true;
    for (int32_t id = 0; id < tok_->n_vocab(); ++id) {
        const auto t = tok_->token_type(id);
        if (t == TokenType::CONTROL || t == TokenType::USER_DEFINED) opt.specials.push_back(tok_->token_piece(id));
    }
    ASSERT_GE(opt.specials.size(), 30u);
    int mismatches = 0, with_special = 0;
    const int kTexts = 600;
    for (int i = 0; i < kTexts && mismatches < 5; ++i) {
        const std::string text = test::random_text(rng, opt);
        const bool parse_special = (i % 2) == 0;
        // "glm4" does not normalize: llama.cpp gets the text as it is.
        ASSERT_EQ(tok_->normalize(text, parse_special), text);
        const auto expected = ref.tokenize(text, parse_special);
        const auto ids = tok_->encode(text, parse_special);
        for (int32_t id : ids) with_special += tok_->token_type(id) != TokenType::NORMAL;
        if (ids != expected) {
            ++mismatches;
            ADD_FAILURE() << "text \"" << test::escape_for_message(text) << "\" parse_special=" << parse_special
                          << "\n ours: " << ::testing::PrintToString(ids)
                          << "\n llama.cpp: " << ::testing::PrintToString(expected);
        }
    }
    EXPECT_EQ(mismatches, 0);
    EXPECT_GT(with_special, kTexts / 10) << "the texts hardly held a special token";
}

TEST_F(GlmTokenizer, VocabularyFactsMatchLlamaCpp) {
    const test::LlamaVocab ref(path_.string());
    const llama_vocab* v = ref.vocab();
    ASSERT_EQ(tok_->n_vocab(), llama_vocab_n_tokens(v));
    int eog = 0;
    for (int32_t id = 0; id < tok_->n_vocab(); ++id) {
        EXPECT_EQ(tok_->is_eog(id), llama_vocab_is_eog(v, id)) << "id " << id << " '" << tok_->token_piece(id) << "'";
        eog += tok_->is_eog(id);
    }
    // <|endoftext|>, <|user|> (eot) and <|observation|> (eom) at least.
    EXPECT_GE(eog, 3);
    EXPECT_TRUE(tok_->is_eog(tok_->token_id("<|user|>")));
    EXPECT_TRUE(tok_->is_eog(tok_->token_id("<|observation|>")));
    EXPECT_EQ(tok_->add_bos(), llama_vocab_get_add_bos(v));
    EXPECT_FALSE(tok_->add_bos()) << "the template writes [gMASK] itself";
    EXPECT_EQ(tok_->bos(), llama_vocab_bos(v));
    EXPECT_EQ(tok_->bos(), tok_->token_id("[gMASK]"));
    EXPECT_EQ(tok_->eos(), llama_vocab_eos(v));
    // Detokenizing each special token's id gives its text, as llama.cpp's
    // piece with special rendering on.
    for (const char* text : {"[gMASK]", "<|assistant|>", "<think>", "<arg_value>"}) {
        const int32_t id = tok_->token_id(text);
        char buf[64];
        const int n = llama_token_to_piece(v, id, buf, sizeof buf, 0, /*special=*/true);
        ASSERT_GT(n, 0) << text;
        EXPECT_EQ(std::string(buf, size_t(n)), tok_->token_piece(id)) << text;
    }
}

}  // namespace
}  // namespace ds4::oracle

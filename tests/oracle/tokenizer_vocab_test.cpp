// ds4's tokenizer against llama.cpp on llama.cpp's own vocab-only GGUFs:
// the official .inp/.out vectors (as tests/test-tokenizer-0.cpp runs them),
// fresh random text compared with libllama's llama_tokenize, and the
// vocabulary facts (end-of-generation set, add_bos, bos/eos).
//
// For "qwen2" ds4 NFC-normalizes the text between special tokens, as Qwen's
// Hugging Face tokenizers do and llama.cpp does not. The model's real
// tokenizer wins on text that is not in NFC (ds4 is checked against it in
// tokenizer_hf_test.cpp), so llama.cpp is asked about the text after ds4's
// normalizer; for every other vocabulary that text is the input. The
// official vectors were made with the Hugging Face tokenizers, so ds4 must
// match them as they are (qwen35's, with a decomposed "e\u0301" kept as 'e'
// + U+0301, show that Qwen3.5's tokenizer does not normalize).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_llama_oracle.h"
#include "tokenizer_random_text.h"

namespace ds4 {
namespace {

std::string vocab_path(const std::string& name) {
    return std::string(DS4_ORACLE_DIR) + "/llama.cpp/models/ggml-vocab-" + name + ".gguf";
}

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// test-tokenizer-0.cpp's format: inputs separated by "\n__ggml_vocab_test__\n",
// outputs one line of space-separated ids per input.
std::vector<std::pair<std::string, std::vector<int32_t>>> load_vectors(const std::string& name) {
    const std::string raw = read_file(vocab_path(name) + ".inp");
    std::vector<std::string> inputs;
    const std::string sep = "\n__ggml_vocab_test__\n";
    size_t pos = 0;
    while (pos < raw.size()) {
        const size_t next = raw.find(sep, pos);
        if (next == std::string::npos) {
            inputs.push_back(raw.substr(pos));
            break;
        }
        inputs.push_back(raw.substr(pos, next - pos));
        pos = next + sep.size();
    }
    std::ifstream out(vocab_path(name) + ".out");
    std::vector<std::pair<std::string, std::vector<int32_t>>> v;
    std::string line;
    size_t i = 0;
    while (std::getline(out, line)) {
        if (i >= inputs.size()) throw std::runtime_error("more outputs than inputs in " + name);
        std::vector<int32_t> ids;
        std::istringstream ls(line);
        int32_t id;
        while (ls >> id) ids.push_back(id);
        v.emplace_back(inputs[i++], std::move(ids));
    }
    if (i != inputs.size()) throw std::runtime_error("inputs and outputs differ in count for " + name);
    return v;
}

class VocabTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        file_ = GgufFile::open(vocab_path(GetParam()));
        tok_ = Tokenizer::from_gguf(*file_);
    }
    std::unique_ptr<GgufFile> file_;
    std::unique_ptr<Tokenizer> tok_;
};

TEST_P(VocabTest, OfficialVectors) {
    const auto vectors = load_vectors(GetParam());
    ASSERT_GT(vectors.size(), 10u);
    for (const auto& [text, expected] : vectors) {
        SCOPED_TRACE("input: \"" + test::escape_for_message(text) + "\"");
        const auto ids = tok_->encode(text, false);
        EXPECT_EQ(ids, expected);
        EXPECT_EQ(tok_->decode(ids), tok_->normalize(text, false));
    }
}

TEST_P(VocabTest, RandomTextMatchesLlamaCpp) {
    const test::LlamaVocab ref(vocab_path(GetParam()));
    const uint64_t seed = test::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with DS4_TEST_SEED=" + std::to_string(seed) + ")");
    std::mt19937_64 rng(seed);
    test::RandomTextOptions opt;
    opt.invalid_utf8 = true;
    for (int32_t id = 0; id < tok_->n_vocab(); ++id) {
        const auto t = tok_->token_type(id);
        if (t == TokenType::CONTROL || t == TokenType::USER_DEFINED) opt.specials.push_back(tok_->token_piece(id));
    }
    opt.specials.push_back("<|im_start|>");
    int mismatches = 0;
    for (int i = 0; i < 400 && mismatches < 5; ++i) {
        const std::string text = test::random_text(rng, opt);
        const bool parse_special = (i % 2) == 0;
        const auto expected = ref.tokenize(tok_->normalize(text, parse_special), parse_special);
        const auto ids = tok_->encode(text, parse_special);
        if (ids != expected) {
            ++mismatches;
            ADD_FAILURE() << "text \"" << test::escape_for_message(text) << "\" parse_special=" << parse_special
                          << "\n ours: " << ::testing::PrintToString(ids)
                          << "\n llama.cpp: " << ::testing::PrintToString(expected);
        }
    }
}

TEST_P(VocabTest, VocabularyFactsMatchLlamaCpp) {
    const test::LlamaVocab ref(vocab_path(GetParam()));
    const llama_vocab* v = ref.vocab();
    ASSERT_EQ(tok_->n_vocab(), llama_vocab_n_tokens(v));
    for (int32_t id = 0; id < tok_->n_vocab(); ++id) {
        EXPECT_EQ(tok_->is_eog(id), llama_vocab_is_eog(v, id)) << "id " << id << " '" << tok_->token_piece(id) << "'";
    }
    EXPECT_EQ(tok_->add_bos(), llama_vocab_get_add_bos(v));
    // llama.cpp falls back to id 11 for a gpt2 vocabulary without the keys;
    // ds4 reports -1 then.
    if (file_->find("tokenizer.ggml.bos_token_id")) EXPECT_EQ(tok_->bos(), llama_vocab_bos(v));
    else EXPECT_EQ(tok_->bos(), -1);
    if (file_->find("tokenizer.ggml.eos_token_id")) EXPECT_EQ(tok_->eos(), llama_vocab_eos(v));
    else EXPECT_EQ(tok_->eos(), -1);
}

INSTANTIATE_TEST_SUITE_P(LlamaCppVocabs, VocabTest,
                         ::testing::Values("qwen2", "qwen35", "llama-bpe", "deepseek-llm", "deepseek-coder", "gpt-2"),
                         [](const auto& info) {
                             std::string n = info.param;
                             for (char& c : n)
                                 if (c == '-') c = '_';
                             return n;
                         });

TEST(TokenizerErrors, RejectsNonBpeVocabulary) {
    const auto file = GgufFile::open(vocab_path("llama-spm"));
    try {
        Tokenizer::from_gguf(*file);
        FAIL() << "an SPM vocabulary was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("llama"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace ds4

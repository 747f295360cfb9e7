// Pre-tokenizer of byte-level BPE vocabularies: splits text into words with
// the regular expressions llama.cpp's llama-vocab.cpp chooses for the GGUF
// key tokenizer.ggml.pre, evaluated with PCRE2 (UTF + UCP, JIT when the
// library has it). BPE merges never cross a word boundary.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ds4 {

struct PretokenizerRegex;

class Pretokenizer {
public:
    // Throws ds4::Error for a pre-tokenizer name ds4 does not know.
    explicit Pretokenizer(const std::string& pre);
    ~Pretokenizer();
    Pretokenizer(const Pretokenizer&) = delete;
    Pretokenizer& operator=(const Pretokenizer&) = delete;

    // Words of `text` as UTF-8 byte strings, in order. Malformed UTF-8 is
    // first repaired the way llama.cpp does (each bad byte -> U+FFFD), so the
    // concatenation of the words is the repaired text.
    std::vector<std::string> split(std::string_view text) const;

    // llama.cpp behaviour tied to the pre-tokenizer name.
    bool ignore_merges() const { return ignore_merges_; }  // a word that is a token is not merged
    bool add_bos_default() const { return add_bos_default_; }
    const std::string& name() const { return name_; }

    static std::vector<std::string> known_names();

private:
    std::string name_;
    bool ignore_merges_ = false;
    bool add_bos_default_ = false;
    std::vector<std::unique_ptr<PretokenizerRegex>> regexes_;
};

}  // namespace ds4

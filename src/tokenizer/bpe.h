// Byte-level BPE merging of one pre-tokenized word, by merge rank. Symbols are
// token ids and merges are looked up by id pair, so a word of n bytes costs
// O(n log n) (a priority queue of candidate pairs), never a rescan per merge.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ds4 {

class BpeMerges {
public:
    // `token_to_id` maps byte-level token text to id; `merges` are "left right"
    // strings in rank order (tokenizer.ggml.merges). A merge whose operands or
    // result are not tokens still takes part (as in llama.cpp); such strings
    // get internal ids >= n_vocab and are spelled out byte by byte at the end.
    BpeMerges(const std::vector<std::string>& id_to_token,
              const std::unordered_map<std::string, int32_t>& token_to_id,
              const std::vector<std::string>& merges);

    // Appends the ids of one word given as raw bytes.
    void encode_word(std::string_view word_bytes, std::vector<int32_t>& out) const;

private:
    struct Merge {
        int32_t rank;
        int32_t result;
    };
    int32_t intern(const std::string& text);
    void emit(int32_t id, std::vector<int32_t>& out) const;

    int32_t n_vocab_;
    const std::unordered_map<std::string, int32_t>& token_to_id_;
    std::unordered_map<std::string, int32_t> extra_to_id_;  // strings that are not tokens
    std::vector<std::string> extra_text_;                    // by id - n_vocab
    std::unordered_map<uint64_t, Merge> merges_;             // (left id, right id) -> merge
    int32_t byte_symbol_[256];                               // initial symbol of each byte
};

}  // namespace ds4

// The tokens a sequence slot holds, with a rolling hash of every prefix.
// A pipeline stage checks that the sequence it continues is the one it
// holds (same length AND same tokens) by comparing prefix hashes, so a
// restarted or confused worker never computes at the wrong position.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ds4 {

class TokenHistory {
public:
    int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
    const std::vector<int32_t>& tokens() const { return tokens_; }
    void append(std::span<const int32_t> tokens);
    // Keeps the first n tokens.
    void truncate(int64_t n);
    void clear() { truncate(0); }
    // Hash of the first n tokens (n <= size()); 0 tokens hash to kEmpty.
    uint64_t prefix_hash(int64_t n) const;
    static constexpr uint64_t kEmpty = 0x9e3779b97f4a7c15ull;
    // The hash of `tokens` following a prefix whose hash is `h`.
    static uint64_t extend(uint64_t h, std::span<const int32_t> tokens);

private:
    std::vector<int32_t> tokens_;
    std::vector<uint64_t> hashes_;  // hashes_[i]: hash of tokens_[0..i]
};

}  // namespace ds4

#include "engine/token_history.h"

#include <xxhash.h>

namespace ds4 {

uint64_t TokenHistory::extend(uint64_t h, std::span<const int32_t> tokens) {
    // One step per token, seeded by the previous hash, so the hash of every
    // prefix is available without rehashing from the start.
    for (int32_t t : tokens) h = XXH64(&t, sizeof t, h);
    return h;
}

void TokenHistory::append(std::span<const int32_t> tokens) {
    uint64_t h = hashes_.empty() ? kEmpty : hashes_.back();
    for (int32_t t : tokens) {
        h = extend(h, std::span<const int32_t>(&t, 1));
        tokens_.push_back(t);
        hashes_.push_back(h);
    }
}

void TokenHistory::truncate(int64_t n) {
    if (n < 0) n = 0;
    if (n >= size()) return;
    tokens_.resize(static_cast<size_t>(n));
    hashes_.resize(static_cast<size_t>(n));
}

uint64_t TokenHistory::prefix_hash(int64_t n) const {
    if (n <= 0) return kEmpty;
    if (n > size()) n = size();
    return hashes_[static_cast<size_t>(n - 1)];
}

}  // namespace ds4

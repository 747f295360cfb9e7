#include "tokenizer/bpe.h"

#include <queue>

#include "tokenizer/unicode_text.h"

namespace ds4 {

namespace {
uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }
}  // namespace

BpeMerges::BpeMerges(const std::vector<std::string>& id_to_token,
                     const std::unordered_map<std::string, int32_t>& token_to_id,
                     const std::vector<std::string>& merges)
    : n_vocab_(static_cast<int32_t>(id_to_token.size())), token_to_id_(token_to_id) {
    for (int b = 0; b < 256; ++b) {
        std::string s;
        utf8_append(s, byte_to_unicode(static_cast<uint8_t>(b)));
        byte_symbol_[b] = intern(s);
    }
    merges_.reserve(merges.size() * 2);
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        const std::string& m = merges[rank];
        // llama.cpp splits at the first space after the first byte, so a
        // left operand may itself be a space.
        const size_t sp = m.find(' ', 1);
        if (sp == std::string::npos) continue;
        const std::string left = m.substr(0, sp), right = m.substr(sp + 1);
        const int32_t l = intern(left), r = intern(right), res = intern(left + right);
        // First (lowest-rank) occurrence of a pair wins, as with emplace.
        merges_.emplace(pair_key(l, r), Merge{static_cast<int32_t>(rank), res});
    }
}

int32_t BpeMerges::intern(const std::string& text) {
    auto it = token_to_id_.find(text);
    if (it != token_to_id_.end()) return it->second;
    auto [e, inserted] = extra_to_id_.emplace(text, n_vocab_ + static_cast<int32_t>(extra_text_.size()));
    if (inserted) extra_text_.push_back(text);
    return e->second;
}

void BpeMerges::emit(int32_t id, std::vector<int32_t>& out) const {
    if (id < n_vocab_) {
        out.push_back(id);
        return;
    }
    // Not a token: fall back to the single-character (byte) tokens.
    std::string one;
    for (uint32_t cp : utf8_decode_lenient(extra_text_[id - n_vocab_])) {
        one.clear();
        utf8_append(one, cp);
        auto it = token_to_id_.find(one);
        if (it != token_to_id_.end()) out.push_back(it->second);
    }
}

void BpeMerges::encode_word(std::string_view word, std::vector<int32_t>& out) const {
    const int n = static_cast<int>(word.size());
    if (n == 0) return;
    if (n == 1) {
        emit(byte_symbol_[static_cast<uint8_t>(word[0])], out);
        return;
    }
    struct Symbol {
        int32_t id;
        int prev, next;
        bool alive;
    };
    struct Candidate {
        int32_t rank;
        int left, right;
        int32_t left_id, right_id;
    };
    // Lowest rank first; on equal rank the leftmost pair (llama.cpp's order).
    auto worse = [](const Candidate& a, const Candidate& b) {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    };
    std::vector<Symbol> sym(n);
    for (int i = 0; i < n; ++i) sym[i] = {byte_symbol_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, true};
    std::vector<Candidate> heap_storage;
    heap_storage.reserve(n);
    std::priority_queue<Candidate, std::vector<Candidate>, decltype(worse)> queue(worse, std::move(heap_storage));
    auto consider = [&](int l, int r) {
        if (l < 0 || r < 0) return;
        auto it = merges_.find(pair_key(sym[l].id, sym[r].id));
        if (it == merges_.end()) return;
        queue.push({it->second.rank, l, r, sym[l].id, sym[r].id});
    };
    for (int i = 0; i + 1 < n; ++i) consider(i, i + 1);
    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        Symbol& L = sym[c.left];
        Symbol& R = sym[c.right];
        // Stale when either side has merged with something else since.
        if (!L.alive || !R.alive || L.next != c.right || L.id != c.left_id || R.id != c.right_id) continue;
        L.id = merges_.at(pair_key(c.left_id, c.right_id)).result;
        R.alive = false;
        L.next = R.next;
        if (R.next >= 0) sym[R.next].prev = c.left;
        consider(L.prev, c.left);
        consider(c.left, L.next);
    }
    for (int i = 0; i >= 0; i = sym[i].next) emit(sym[i].id, out);
}

}  // namespace ds4

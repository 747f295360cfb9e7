#include "engine/prefix_cache.h"

#include <algorithm>

namespace ds4 {

void PrefixCache::store(const Session& session) {
    if (session.n_past() == 0) return;
    store(session.snapshot());
}

void PrefixCache::store(SessionSnapshot snap) {
    if (snap.n_past() == 0) return;
    if (disk_) disk_->store(snap);
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
        if (it->tokens == snap.tokens) {
            bytes_ -= it->bytes();
            entries_.erase(it);
            break;
        }
    if (snap.bytes() > max_bytes_) return;
    while (bytes_ + snap.bytes() > max_bytes_ && !entries_.empty()) {
        bytes_ -= entries_.back().bytes();
        entries_.pop_back();
        ++stats_.evictions;
    }
    bytes_ += snap.bytes();
    entries_.push_front(std::move(snap));
    ++stats_.stores;
}

const SessionSnapshot* PrefixCache::find(std::span<const int32_t> prompt, int64_t at_least) {
    auto best = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        const auto n = static_cast<int64_t>(it->tokens.size());
        if (n <= at_least || n >= static_cast<int64_t>(prompt.size())) continue;
        if (best != entries_.end() && n <= static_cast<int64_t>(best->tokens.size())) continue;
        if (std::equal(it->tokens.begin(), it->tokens.end(), prompt.begin())) best = it;
    }
    if (disk_) {
        const int64_t ram = best == entries_.end() ? at_least : std::max<int64_t>(at_least, best->tokens.size());
        if (std::optional<SessionSnapshot> snap = disk_->load(prompt, ram)) {
            ++stats_.disk_hits;
            if (snap->bytes() <= max_bytes_) {  // kept in RAM too (store() finds it already on disk)
                store(std::move(*snap));
                return &entries_.front();
            }
            from_disk_ = std::move(snap);
            return &*from_disk_;
        }
    }
    if (best == entries_.end()) {
        ++stats_.misses;
        return nullptr;
    }
    ++stats_.hits;
    entries_.splice(entries_.begin(), entries_, best);  // most recently used
    return &entries_.front();
}

}  // namespace ds4

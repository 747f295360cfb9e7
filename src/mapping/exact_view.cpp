#include "mapping/exact_view.h"

#include <algorithm>
#include <cstdint>

namespace ds4 {

// The mapping behind the views of one page range. When the last view lets
// go, the pages go back to the cache's idle list instead of being unmapped
// (or are unmapped when the cache is gone or full).
struct ExactViewCache::Shared {
    Shared(PageRange k, MappedPages p, std::weak_ptr<ExactViewCache> o)
        : key(k), pages(std::move(p)), owner(std::move(o)) {}
    ~Shared() {
        if (auto cache = owner.lock()) cache->release(key, std::move(pages));
    }
    PageRange key;
    MappedPages pages;
    std::weak_ptr<ExactViewCache> owner;
};

std::shared_ptr<ExactViewCache> ExactViewCache::create(int fd, std::string path, uint64_t file_size,
                                                       size_t idle_limit) {
    return std::shared_ptr<ExactViewCache>(new ExactViewCache(fd, std::move(path), file_size, idle_limit));
}

std::shared_ptr<const FileView> ExactViewCache::view(uint64_t offset, uint64_t size) {
    const uint64_t page = page_size();
    const PageRange key{offset / page, (offset + size + page - 1) / page};
    std::shared_ptr<const Shared> shared = acquire(key);
    return std::make_shared<OwningFileView<Shared>>(shared, shared->pages.at(offset), offset, size);
}

std::shared_ptr<const ExactViewCache::Shared> ExactViewCache::acquire(PageRange key) {
    auto covers = [&](const PageRange& have) { return have.first <= key.first && key.second <= have.second; };
    std::lock_guard lock(mu_);
    // A strong reference obtained here must never be the last one dropped
    // while mu_ is held (its destructor takes mu_): every path returns it.
    //
    // A live mapping of these pages or of a larger range around them (a
    // part of a pinned tensor, one expert of an expert tensor) serves the
    // view. Only the few nearest candidates are tried, so that thousands of
    // pins do not make every view slow; nested ranges that far apart just
    // get their own mapping.
    auto it = live_.upper_bound(PageRange{key.first, UINT64_MAX});
    for (int tries = 0; tries < 8 && it != live_.begin(); ++tries) {
        --it;
        if (covers(it->first))
            if (auto held = it->second.lock()) return held;
    }

    MappedPages pages;
    PageRange range = key;
    auto idle = std::find_if(idle_.begin(), idle_.end(), [&](const auto& e) { return covers(e.first); });
    if (idle != idle_.end()) {
        range = idle->first;
        pages = std::move(idle->second);
        idle_.erase(idle);
    } else {
        const uint64_t page = page_size();
        const uint64_t end = std::min(key.second * page, file_size_);
        pages = MappedPages::map(fd_, path_, key.first * page, end, /*populate=*/false);
    }
    std::shared_ptr<const Shared> held = std::make_shared<Shared>(range, std::move(pages), weak_from_this());
    live_[range] = held;
    return held;
}

void ExactViewCache::release(PageRange key, MappedPages pages) {
    MappedPages evicted;  // unmapped after the lock is released
    std::lock_guard lock(mu_);
    auto live = live_.find(key);
    if (live != live_.end()) {
        // Another thread may have mapped the same pages again between our
        // last reference going away and this call; that mapping wins.
        if (!live->second.expired()) return;  // `pages` is unmapped on return
        live_.erase(live);
    }
    if (idle_limit_ == 0) return;
    idle_.emplace_front(key, std::move(pages));
    if (idle_.size() > idle_limit_) {
        evicted = std::move(idle_.back().second);
        idle_.pop_back();
    }
}

size_t ExactViewCache::count() const {
    std::lock_guard lock(mu_);
    size_t n = idle_.size();
    for (const auto& [key, weak] : live_) n += weak.expired() ? 0 : 1;
    return n;
}

}  // namespace ds4

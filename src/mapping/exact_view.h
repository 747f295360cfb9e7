// Exact views: byte ranges of the model file outside the mapped regions,
// each served by a mapping of exactly the pages that cover it. Views of the
// same pages share one mapping while anyone holds one; a few mappings nobody
// holds stay cached (most recent first) so that asking again is free.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "mapping/mapped_pages.h"
#include "mapping/model_map.h"

namespace ds4 {

// A view onto a mapping it keeps alive (a region's or an exact view's).
template <class Owner>
class OwningFileView final : public FileView {
public:
    OwningFileView(std::shared_ptr<const Owner> owner, const uint8_t* data, uint64_t offset, uint64_t size)
        : owner_(std::move(owner)), data_(data), offset_(offset), size_(size) {}
    const uint8_t* data() const override { return data_; }
    uint64_t offset() const override { return offset_; }
    uint64_t size() const override { return size_; }

private:
    std::shared_ptr<const Owner> owner_;
    const uint8_t* data_;
    uint64_t offset_;
    uint64_t size_;
};

class ExactViewCache : public std::enable_shared_from_this<ExactViewCache> {
public:
    static std::shared_ptr<ExactViewCache> create(int fd, std::string path, uint64_t file_size, size_t idle_limit);

    // [offset, offset+size) must be non-empty and inside the file.
    std::shared_ptr<const FileView> view(uint64_t offset, uint64_t size);
    size_t count() const;  // mappings held by someone or idle

private:
    using PageRange = std::pair<uint64_t, uint64_t>;  // [first page, end page)
    struct Shared;  // one mapping, shared by every view of its pages

    ExactViewCache(int fd, std::string path, uint64_t file_size, size_t idle_limit)
        : fd_(fd), path_(std::move(path)), file_size_(file_size), idle_limit_(idle_limit) {}
    std::shared_ptr<const Shared> acquire(PageRange key);
    void release(PageRange key, MappedPages pages);  // called as the last holder lets go

    const int fd_;
    const std::string path_;
    const uint64_t file_size_;
    const size_t idle_limit_;

    mutable std::mutex mu_;
    std::map<PageRange, std::weak_ptr<const Shared>> live_;
    std::list<std::pair<PageRange, MappedPages>> idle_;  // front: released most recently
};

}  // namespace ds4

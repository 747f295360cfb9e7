// One read-only shared mapping of the pages that cover a byte range of a
// file. Everything the model map hands out points into one of these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ds4 {

uint64_t page_size();

class MappedPages {
public:
    // Maps the pages covering [begin, end) of the open file `fd` (named
    // `path` in errors); end must not pass the end of the file. Throws
    // ds4::Error when the kernel refuses.
    static MappedPages map(int fd, const std::string& path, uint64_t begin, uint64_t end, bool populate);

    MappedPages() = default;
    MappedPages(MappedPages&& o) noexcept { *this = std::move(o); }
    MappedPages& operator=(MappedPages&& o) noexcept;
    MappedPages(const MappedPages&) = delete;
    MappedPages& operator=(const MappedPages&) = delete;
    ~MappedPages() { unmap(); }

    // Address of absolute file offset `offset` (which must lie inside).
    const uint8_t* at(uint64_t offset) const { return base_ + (offset - file_begin_); }
    uint8_t* base() const { return base_; }
    size_t length() const { return length_; }

private:
    void unmap() noexcept;
    uint8_t* base_ = nullptr;
    size_t length_ = 0;
    uint64_t file_begin_ = 0;  // page-aligned file offset of base_
};

}  // namespace ds4

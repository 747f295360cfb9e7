#include "mapping/mapped_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/error.h"

namespace ds4 {

uint64_t page_size() {
    static const uint64_t page = [] {
        const long p = ::sysconf(_SC_PAGESIZE);
        return p > 0 ? static_cast<uint64_t>(p) : uint64_t{4096};
    }();
    return page;
}

MappedPages MappedPages::map(int fd, const std::string& path, uint64_t begin, uint64_t end, bool populate) {
    // mmap wants a page-aligned file offset; the first page may start before
    // `begin`, and the last page may run past `end` (up to the end of the
    // file, which the kernel handles: the tail of the last page reads as 0).
    const uint64_t first = begin / page_size() * page_size();
    const uint64_t length = end - first;
    const int flags = MAP_SHARED | (populate ? MAP_POPULATE : 0);
    void* p = ::mmap(nullptr, static_cast<size_t>(length), PROT_READ, flags, fd, static_cast<off_t>(first));
    if (p == MAP_FAILED)
        throw Error("cannot map bytes " + std::to_string(begin) + " to " + std::to_string(end) + " of model file " + path +
                    ": " + std::strerror(errno) + ".");
    MappedPages m;
    m.base_ = static_cast<uint8_t*>(p);
    m.length_ = static_cast<size_t>(length);
    m.file_begin_ = first;
    return m;
}

MappedPages& MappedPages::operator=(MappedPages&& o) noexcept {
    if (this != &o) {
        unmap();
        base_ = std::exchange(o.base_, nullptr);
        length_ = std::exchange(o.length_, 0);
        file_begin_ = std::exchange(o.file_begin_, 0);
    }
    return *this;
}

void MappedPages::unmap() noexcept {
    if (base_) ::munmap(base_, length_);
    base_ = nullptr;
    length_ = 0;
}

}  // namespace ds4

// Host buffers for sequence state (prefix-cache snapshots): hundreds of MB
// each, written once by a download or a file read. std::vector<float>(n)
// zero-fills every page before the copy writes it again, and 4 KiB pages
// cost a fault each: on an H100 host a 490 MB snapshot took ~0.18 s, the
// page faults most of it (2026-12-06). This allocator leaves new elements
// uninitialized and asks for transparent huge pages on large blocks
// (512x fewer faults where the kernel's THP mode is `madvise` or `always`).
#pragma once

#include <cstddef>
#include <new>
#include <utility>
#include <vector>

namespace ds4 {

void* bulk_allocate(std::size_t bytes);
void bulk_free(void* p, std::size_t bytes) noexcept;

template <class T>
struct BulkAllocator {
    using value_type = T;
    BulkAllocator() = default;
    template <class U>
    BulkAllocator(const BulkAllocator<U>&) noexcept {}
    T* allocate(std::size_t n) {
        if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
        return static_cast<T*>(bulk_allocate(n * sizeof(T)));
    }
    void deallocate(T* p, std::size_t n) noexcept { bulk_free(p, n * sizeof(T)); }
    // resize(n) and vector(n) default-initialize: no zero fill.
    template <class U>
    void construct(U* p) noexcept {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
    friend bool operator==(const BulkAllocator&, const BulkAllocator&) { return true; }
};

// One tensor of sequence state on the host.
using StateFloats = std::vector<float, BulkAllocator<float>>;

}  // namespace ds4

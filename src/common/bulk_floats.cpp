#include "common/bulk_floats.h"

#include <sys/mman.h>

#include <cstdlib>

namespace ds4 {

namespace {
constexpr std::size_t kHugePage = std::size_t{2} << 20;
}

void* bulk_allocate(std::size_t bytes) {
    if (bytes < kHugePage) {
        void* p = std::malloc(bytes ? bytes : 1);
        if (!p) throw std::bad_alloc();
        return p;
    }
    // Whole huge pages, aligned, so the kernel can back them with 2 MiB
    // pages; the advice is a hint (no THP: 4 KiB pages as before).
    const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, rounded);
    if (!p) throw std::bad_alloc();
    madvise(p, rounded, MADV_HUGEPAGE);
    return p;
}

void bulk_free(void* p, std::size_t) noexcept { std::free(p); }

}  // namespace ds4

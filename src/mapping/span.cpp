// Spans → regions. Kept free of any file or mapping so it can be tested on
// its own with millions of random layouts.
#include <algorithm>
#include <unistd.h>

#include "mapping/model_map.h"

namespace ds4 {

uint64_t region_max_gap() {
    // Below a page a gap costs nothing: the pages on both sides are mapped
    // anyway. 64 KiB of unused bytes is cheaper than another mapping (a VMA,
    // a TLB working set, a separate device allocation on CUDA).
    const long page = ::sysconf(_SC_PAGESIZE);
    return std::max<uint64_t>(page > 0 ? static_cast<uint64_t>(page) : 4096, 64 * 1024);
}

std::vector<Region> coalesce_spans(std::vector<Span> spans, uint64_t max_gap) {
    std::erase_if(spans, [](const Span& s) { return s.end <= s.begin; });
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    std::vector<Region> regions;
    for (const Span& s : spans) {
        // Overlapping spans (end > s.begin) have no gap and always merge.
        if (!regions.empty() && (s.begin <= regions.back().end || s.begin - regions.back().end <= max_gap)) {
            Region& r = regions.back();
            r.end = std::max(r.end, s.end);
            r.tensors.push_back(s.tensor);
        } else {
            regions.push_back(Region{s.begin, s.end, {s.tensor}});
        }
    }
    return regions;
}

}  // namespace ds4

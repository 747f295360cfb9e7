// The model map: which bytes of the GGUF file this process needs, as few
// mapped regions as possible. Tensor spans whose gap is at most
// max(page size, 64 KiB) coalesce; a selection covering all tensor data is
// ONE region. A byte range outside the regions is served by an exact view
// (page-aligned mapping, cached, reference-counted), so asking for any
// in-file range never fails.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/layer_range.h"
#include "gguf/gguf_file.h"

namespace ds4 {

// One tensor's bytes in the file: [begin, end) absolute offsets.
struct Span {
    uint64_t begin = 0;
    uint64_t end = 0;
    size_t tensor = 0;  // index into GgufFile::tensors()
};

// A coalesced run of spans, made resident as one unit.
struct Region {
    uint64_t begin = 0;  // absolute file offsets, [begin, end)
    uint64_t end = 0;
    std::vector<size_t> tensors;  // indices of the spans' tensors, by offset
    uint64_t bytes() const { return end - begin; }
};

// The largest gap two spans may have and still share a region.
uint64_t region_max_gap();

// Pure coalescing: sorts spans by offset and merges those whose gap is
// <= max_gap. Empty spans are skipped. Used by ModelMap and tested alone.
std::vector<Region> coalesce_spans(std::vector<Span> spans, uint64_t max_gap);

// What a tensor is for, from its GGUF name (llama.cpp naming conventions).
enum class TensorRole { Embedding, NonRouted, RoutedExperts, Output };
TensorRole tensor_role(const std::string& name);
// Layer index of a "blk.N." tensor; -1 for tensors outside the blocks.
int tensor_layer(const std::string& name);

// What a process needs: a layer slice and roles. An empty slice maps only
// the embedding and the output head.
struct MapSelection {
    LayerRange layers;
    bool embedding = true;
    bool output = true;
    bool non_routed = true;
    bool routed_experts = true;
    bool selects(const std::string& tensor_name) const;
};

struct ModelMapOptions {
    bool populate = false;  // MAP_POPULATE: read everything in up front
    bool lock = false;      // mlock the regions (best effort, logged on failure)
    // Exact views nobody holds any more that stay mapped, most recent first,
    // so a caller that asks for the same range again and again does not pay
    // an mmap/munmap pair each time. 0 unmaps a view as soon as it is let go.
    size_t idle_views = 16;
};

// A mapped window of the file; the pointer stays valid while the view lives.
class FileView {
public:
    virtual ~FileView() = default;
    virtual const uint8_t* data() const = 0;  // first requested byte
    virtual uint64_t offset() const = 0;      // absolute file offset of data()
    virtual uint64_t size() const = 0;
};

// Views are safe to hold past the ModelMap's lifetime: each one keeps the
// mapping it points into alive.
class ModelMap {
public:
    // Maps the selected tensors' regions of `file` (which must be a real
    // file, opened with GgufFile::open, and outlive the map). Throws
    // ds4::Error on a bad selection or an mmap failure.
    static std::unique_ptr<ModelMap> build(const GgufFile& file, const MapSelection& sel,
                                           const ModelMapOptions& opts = {});
    ~ModelMap();

    const GgufFile& file() const { return file_; }
    const std::vector<Region>& regions() const { return regions_; }
    size_t span_count() const { return span_count_; }
    uint64_t mapped_bytes() const;
    // The gap used to coalesce: region_max_gap(), or the file's alignment
    // when that is larger, so that alignment padding alone never splits a
    // region (a selection covering all tensor data is always one region).
    uint64_t max_gap() const { return max_gap_; }
    // Problems that did not stop the map (e.g. mlock refused), one sentence
    // each; they are also written to stderr as they happen.
    const std::vector<std::string>& warnings() const { return warnings_; }

    // "model map: N region(s) across M tensor spans (X GiB of Y GiB file)"
    std::string summary() const;

    // Pointer to a tensor's bytes: inside a region when selected, otherwise
    // through an exact view kept for the map's lifetime. nullptr for a
    // tensor of zero bytes outside every region. Throws for a name the file
    // lacks.
    const uint8_t* tensor_data(const GgufTensorInfo& t);
    const uint8_t* tensor_data(const std::string& name);

    // Any byte range of the file. Served from a region when it lies inside
    // one, else from an exact view (cached; reference-counted by shared_ptr).
    // Throws only when the range is not inside the file. An empty range
    // outside every region gives an empty view whose data() is nullptr.
    std::shared_ptr<const FileView> view(uint64_t offset, uint64_t size);

    // Region containing [offset, offset+size), or nullptr.
    const Region* region_of(uint64_t offset, uint64_t size) const;
    // Base address of a mapped region (index into regions()).
    const uint8_t* region_data(size_t region_index) const;

    // Exact views currently mapped: held by someone (including the map's own
    // tensor_data() pins) or idle in the cache.
    size_t exact_view_count() const;

private:
    explicit ModelMap(const GgufFile& f);  // out of line: Impl is complete only there
    struct Impl;
    const GgufFile& file_;
    std::vector<Region> regions_;
    size_t span_count_ = 0;
    uint64_t max_gap_ = 0;
    std::vector<std::string> warnings_;
    std::unique_ptr<Impl> impl_;
};

}  // namespace ds4

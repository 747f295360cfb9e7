#include "mapping/model_map.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "common/byte_size.h"
#include "common/error.h"
#include "common/log.h"
#include "mapping/exact_view.h"
#include "mapping/mapped_pages.h"

namespace ds4 {

struct ModelMap::Impl {
    // Declared first, destroyed last: the pins below hand their pages back
    // to it as they go.
    std::shared_ptr<ExactViewCache> exact;
    // Shared so that a view onto a region keeps the region mapped.
    std::vector<std::shared_ptr<const MappedPages>> region_pages;
    std::mutex pins_mu;
    std::unordered_map<size_t, std::shared_ptr<const FileView>> pins;  // tensor index → exact view
};

namespace {


void check_selection(const GgufFile& file, const MapSelection& sel) {
    const LayerRange& r = sel.layers;
    if (r.begin < 0 || r.end < LayerRange::kThroughLast || (r.end != LayerRange::kThroughLast && r.end < r.begin))
        throw Error("cannot map model file " + file.path() + " for layers [" + std::to_string(r.begin) + ", " +
                    std::to_string(r.end) + "): a layer slice needs 0 <= begin <= end (end -1 = the last layer).");
}

class EmptyView final : public FileView {
public:
    explicit EmptyView(uint64_t offset) : offset_(offset) {}
    const uint8_t* data() const override { return nullptr; }
    uint64_t offset() const override { return offset_; }
    uint64_t size() const override { return 0; }

private:
    uint64_t offset_;
};

}  // namespace

std::unique_ptr<ModelMap> ModelMap::build(const GgufFile& file, const MapSelection& sel, const ModelMapOptions& opts) {
    if (file.fd() < 0)
        throw Error("cannot map " + file.path() + ": it was parsed from memory, and a model map needs the file on disk.");
    check_selection(file, sel);

    std::vector<Span> spans;
    const auto& tensors = file.tensors();
    for (size_t i = 0; i < tensors.size(); ++i) {
        const GgufTensorInfo& t = tensors[i];
        if (t.nbytes == 0 || !sel.selects(t.name)) continue;
        spans.push_back(Span{t.file_offset, t.file_offset + t.nbytes, i});
    }

    std::unique_ptr<ModelMap> map(new ModelMap(file));
    map->impl_ = std::make_unique<Impl>();
    map->span_count_ = spans.size();
    map->max_gap_ = std::max(region_max_gap(), file.alignment());
    map->regions_ = coalesce_spans(std::move(spans), map->max_gap_);
    map->impl_->exact = ExactViewCache::create(file.fd(), file.path(), file.file_size(), opts.idle_views);

    for (size_t r = 0; r < map->regions_.size(); ++r) {
        const Region& region = map->regions_[r];
        auto pages = std::make_shared<MappedPages>(
            MappedPages::map(file.fd(), file.path(), region.begin, region.end, opts.populate));
        if (opts.lock && ::mlock(pages->base(), pages->length()) != 0) {
            const int err = errno;
            map->warnings_.push_back("could not lock region " + std::to_string(r + 1) + " of " +
                                     std::to_string(map->regions_.size()) + " (" + gib_text(double(region.bytes())) +
                                     ") of model file " + file.path() + " in memory (" + std::strerror(err) +
                                     "); it stays mapped and may be paged out.");
            log_warning(map->warnings_.back());
        }
        map->impl_->region_pages.push_back(std::move(pages));
    }
    return map;
}

ModelMap::ModelMap(const GgufFile& f) : file_(f) {}
ModelMap::~ModelMap() = default;

uint64_t ModelMap::mapped_bytes() const {
    uint64_t total = 0;
    for (const Region& r : regions_) total += r.bytes();
    return total;
}

std::string ModelMap::summary() const {
    const size_t n = regions_.size();
    return "model map: " + std::to_string(n) + (n == 1 ? " region" : " regions") + " across " +
           std::to_string(span_count_) + " tensor spans (" + gib_text(double(mapped_bytes())) + " of " +
           gib_text(double(file_.file_size())) + " file)";
}

const Region* ModelMap::region_of(uint64_t offset, uint64_t size) const {
    // The last region starting at or before `offset`; regions are sorted and
    // disjoint, so it is the only candidate.
    auto it = std::upper_bound(regions_.begin(), regions_.end(), offset,
                               [](uint64_t off, const Region& r) { return off < r.begin; });
    if (it == regions_.begin()) return nullptr;
    const Region& r = *std::prev(it);
    if (offset > r.end || size > r.end - offset) return nullptr;
    return &r;
}

const uint8_t* ModelMap::region_data(size_t region_index) const {
    if (region_index >= regions_.size())
        throw Error("model map of " + file_.path() + " has " + std::to_string(regions_.size()) + " regions, not " +
                    std::to_string(region_index + 1) + ".");
    return impl_->region_pages[region_index]->at(regions_[region_index].begin);
}

std::shared_ptr<const FileView> ModelMap::view(uint64_t offset, uint64_t size) {
    const uint64_t file_size = file_.file_size();
    if (offset > file_size || size > file_size - offset)
        throw Error("cannot view " + std::to_string(size) + " bytes at offset " + std::to_string(offset) +
                    " of model file " + file_.path() + ": the file has only " + std::to_string(file_size) + " bytes.");
    if (const Region* r = region_of(offset, size)) {
        const auto& pages = impl_->region_pages[static_cast<size_t>(r - regions_.data())];
        return std::make_shared<OwningFileView<MappedPages>>(pages, pages->at(offset), offset, size);
    }
    if (size == 0) return std::make_shared<EmptyView>(offset);
    return impl_->exact->view(offset, size);
}

const uint8_t* ModelMap::tensor_data(const GgufTensorInfo& t) {
    const auto& tensors = file_.tensors();
    size_t index;
    if (!tensors.empty() && &t >= tensors.data() && &t < tensors.data() + tensors.size()) {
        index = static_cast<size_t>(&t - tensors.data());
    } else {
        const GgufTensorInfo& own = file_.require_tensor(t.name);
        index = static_cast<size_t>(&own - tensors.data());
    }
    const GgufTensorInfo& info = tensors[index];
    if (const Region* r = region_of(info.file_offset, info.nbytes))
        return impl_->region_pages[static_cast<size_t>(r - regions_.data())]->at(info.file_offset);
    if (info.nbytes == 0) return nullptr;

    std::lock_guard lock(impl_->pins_mu);
    auto& pin = impl_->pins[index];
    if (!pin) pin = view(info.file_offset, info.nbytes);
    return pin->data();
}

const uint8_t* ModelMap::tensor_data(const std::string& name) { return tensor_data(file_.require_tensor(name)); }

size_t ModelMap::exact_view_count() const { return impl_->exact->count(); }

}  // namespace ds4

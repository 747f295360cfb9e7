#include "experts/expert_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "mapping/model_map.h"

namespace ds4 {

namespace {

// Slot parts start on this boundary, so a matrix in a slot is aligned as
// well as one in the mapped file (the vectorised row loads assume it).
constexpr uint64_t kSlotAlign = 256;

// A tensor the family bound (a scale the file has), data or not.
bool bound(const WeightRef& w) { return !w.name.empty(); }

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

uint64_t checked_product(uint64_t a, uint64_t b) {
    if (b != 0 && a > std::numeric_limits<uint64_t>::max() / b)
        throw Error("the expert cache's slot table would be larger than the address space.");
    return a * b;
}

// Zero pages, committed only where written (on CUDA the host side of a
// device-resident cache is never written).
uint8_t* map_anonymous(uint64_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        throw Error("cannot reserve " + std::to_string(bytes >> 20) + " MiB for the expert cache's slots.");
    return static_cast<uint8_t*>(p);
}

WeightRef slot_view(const WeightRef& w, uint8_t* base, uint64_t slot_bytes, int64_t n_slots) {
    WeightRef v = w;
    v.data = base;
    v.matrix_bytes = slot_bytes;  // matrix i is slot i
    v.ne[2] = n_slots;
    v.offset = 0;
    return v;
}

}  // namespace

uint64_t ExpertCache::slot_bytes_for(const std::vector<RoutedExperts>& blocks) {
    uint64_t bytes = 0;
    for (const RoutedExperts& b : blocks)
        bytes = std::max(bytes, align_up(b.gate.matrix_bytes, kSlotAlign) + align_up(b.up.matrix_bytes, kSlotAlign) +
                                    align_up(b.down.matrix_bytes, kSlotAlign));
    return bytes;
}

ExpertCache::ExpertCache(Backend& backend, ModelMap& map, const std::vector<RoutedExperts>& blocks, int64_t slots)
    : reader_(map.file().path()), slot_bytes_(slot_bytes_for(blocks)) {
    if (slots < 0) throw Error("the expert cache needs a slot count of 0 (every expert) or more, not " +
                               std::to_string(slots) + ".");
    int64_t total = 0;
    size_t n_scaled = 0;
    for (const RoutedExperts& b : blocks) {
        BlockLayout L;
        L.up_offset = align_up(b.gate.matrix_bytes, kSlotAlign);
        L.down_offset = L.up_offset + align_up(b.up.matrix_bytes, kSlotAlign);
        const bool scaled = bound(b.gate_scale) || bound(b.up_scale) || bound(b.down_scale);
        L.scales = scaled ? n_scaled++ : std::numeric_limits<size_t>::max();
        layout_[b.layer] = L;
        total += b.n_expert();
    }
    // More slots than experts would never be filled.
    n_slots_ = slots == 0 ? total : std::min<int64_t>(slots, total);
    if (n_slots_ == 0) return;  // a slice without MoE blocks
    slot_.resize(static_cast<size_t>(n_slots_));
    // One slot of slack: a block's up and down views start inside slot 0 and
    // span n_slots strides, so their last matrix ends past the table.
    bytes_size_ = checked_product(uint64_t(n_slots_) + 1, slot_bytes_);
    bytes_ = map_anonymous(bytes_size_);
    backend.attach_buffer(bytes_, bytes_size_);
    if (n_scaled > 0) {
        scales_size_ = checked_product(checked_product(n_scaled, 3), uint64_t(n_slots_) * sizeof(float));
        scales_ = reinterpret_cast<float*>(map_anonymous(scales_size_));
        backend.attach_buffer(reinterpret_cast<uint8_t*>(scales_), scales_size_);
    }
}

ExpertCache::~ExpertCache() {
    if (bytes_) munmap(bytes_, bytes_size_);
    if (scales_) munmap(scales_, scales_size_);
}

std::string ExpertCache::describe() const {
    char line[200];
    std::snprintf(line, sizeof line, "experts: cache of %lld slots x %.2f MiB (%.2f GiB), read from the file on a miss",
                  static_cast<long long>(n_slots_), double(slot_bytes_) / double(1 << 20),
                  double(n_slots_) * double(slot_bytes_) / double(uint64_t{1} << 30));
    return line;
}

std::string ExpertCache::stats_line() const {
    char line[200];
    std::snprintf(line, sizeof line, "experts: %llu lookups, %llu hits (%.1f%%), %llu misses, %.2f GiB read from the file",
                  static_cast<unsigned long long>(stats_.lookups), static_cast<unsigned long long>(stats_.hits),
                  stats_.lookups ? 100.0 * double(stats_.hits) / double(stats_.lookups) : 0.0,
                  static_cast<unsigned long long>(stats_.misses),
                  double(stats_.bytes_read) / double(uint64_t{1} << 30));
    return line;
}

ExpertMatrices ExpertCache::resolve(Backend& backend, const RoutedExperts& block, Routing& routing) {
    const auto lay = layout_.find(block.layer);
    if (lay == layout_.end())
        throw Error("the expert cache was not built for block " + std::to_string(block.layer) + ".");
    const int64_t n = routing.rows * routing.n_used;
    std::vector<int32_t> ids(static_cast<size_t>(n));
    backend.download_ints(routing.experts, ids.data());
    std::vector<int32_t> wanted(ids);
    std::sort(wanted.begin(), wanted.end());
    wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
    if (int64_t(wanted.size()) > n_slots_)
        throw Error("block " + std::to_string(block.layer) + " needs " + std::to_string(wanted.size()) +
                    " experts at once in this step, but the expert cache holds only " + std::to_string(n_slots_) +
                    "; give it at least that many slots.");
    // Every expert of this step is touched before any miss is loaded, so a
    // miss never evicts an expert the same step needs.
    ++tick_;
    std::unordered_map<int32_t, int32_t> slot_of;
    for (int32_t e : wanted) {
        if (e < 0 || e >= block.n_expert())
            throw Error("routing chose expert " + std::to_string(e) + " of " + std::to_string(block.n_expert()) +
                        " in block " + std::to_string(block.layer) + ".");
        ++stats_.lookups;
        const auto it = where_.find((uint64_t(block.layer) << 32) | uint32_t(e));
        if (it != where_.end()) {
            ++stats_.hits;
            slot_[size_t(it->second)].last_use = tick_;
            slot_of[e] = int32_t(it->second);
        }
    }
    for (int32_t e : wanted)
        if (!slot_of.count(e)) slot_of[e] = int32_t(slot_for(block, e, backend));
    for (int32_t& id : ids) id = slot_of[id];
    backend.upload_ints(routing.experts, ids.data());

    const BlockLayout& L = lay->second;
    ExpertMatrices m;
    m.gate = slot_view(block.gate, bytes_, slot_bytes_, n_slots_);
    m.up = slot_view(block.up, bytes_ + L.up_offset, slot_bytes_, n_slots_);
    m.down = slot_view(block.down, bytes_ + L.down_offset, slot_bytes_, n_slots_);
    const WeightRef* scale[3] = {&block.gate_scale, &block.up_scale, &block.down_scale};
    WeightRef* out[3] = {&m.gate_scale, &m.up_scale, &m.down_scale};
    for (int k = 0; k < 3; ++k) {
        if (!bound(*scale[k])) continue;
        WeightRef s = *scale[k];
        s.data = reinterpret_cast<const uint8_t*>(scales_ + (L.scales * 3 + size_t(k)) * size_t(n_slots_));
        if (s.ne[0] > 1) s.ne[0] = n_slots_;  // one value per slot; a single value applies to all
        s.offset = 0;
        *out[k] = s;
    }
    return m;
}

int64_t ExpertCache::slot_for(const RoutedExperts& block, int64_t expert, Backend& backend) {
    // A free slot, else the least recently used one this step does not need.
    int64_t victim = -1;
    for (int64_t s = 0; s < n_slots_; ++s) {
        const Slot& c = slot_[size_t(s)];
        if (c.layer < 0) {
            victim = s;
            break;
        }
        if (c.last_use < tick_ && (victim < 0 || c.last_use < slot_[size_t(victim)].last_use)) victim = s;
    }
    Slot& v = slot_[size_t(victim)];  // resolve() checked that the step fits
    if (v.layer >= 0) where_.erase((uint64_t(v.layer) << 32) | uint32_t(v.expert));
    load(victim, block, expert, backend);
    v = Slot{block.layer, expert, tick_};
    where_[(uint64_t(block.layer) << 32) | uint32_t(expert)] = victim;
    return victim;
}

void ExpertCache::load(int64_t slot, const RoutedExperts& block, int64_t expert, Backend& backend) {
    ++stats_.misses;
    const BlockLayout& L = layout_.at(block.layer);
    uint8_t* base = bytes_ + uint64_t(slot) * slot_bytes_;
    const std::pair<const WeightRef*, uint64_t> parts[3] = {
        {&block.gate, 0}, {&block.up, L.up_offset}, {&block.down, L.down_offset}};
    for (const auto& [w, at] : parts) {
        // The file is the only copy of the expert's matrix.
        staging_.resize(w->matrix_bytes);
        reader_.read(w->offset + uint64_t(expert) * w->matrix_bytes, w->matrix_bytes, staging_.data(),
                     "expert " + std::to_string(expert) + " of '" + w->name + "'");
        backend.write_weights(base + at, staging_.data(), w->matrix_bytes);
        stats_.bytes_read += w->matrix_bytes;
    }
    const WeightRef* scale[3] = {&block.gate_scale, &block.up_scale, &block.down_scale};
    for (int k = 0; k < 3; ++k) {
        const WeightRef& s = *scale[k];
        if (!bound(s)) continue;
        const int64_t i = s.ne[0] > 1 ? expert : 0;
        uint8_t value[sizeof(float)];
        reader_.read(s.offset + uint64_t(i) * sizeof(float), sizeof(float), value, "the scale of expert " +
                     std::to_string(expert) + " in '" + s.name + "'");
        float* dst = scales_ + (L.scales * 3 + size_t(k)) * size_t(n_slots_) + (s.ne[0] > 1 ? slot : 0);
        backend.write_weights(reinterpret_cast<uint8_t*>(dst), value, sizeof(float));
    }
}

}  // namespace ds4

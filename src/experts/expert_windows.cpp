#include "experts/expert_windows.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "common/byte_size.h"
#include "common/error.h"
#include "experts/expert_reader.h"
#include "experts/host_tier.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"

namespace ds4 {

namespace {

// A window's parts start on this boundary (the kernels' vector loads and
// staging assume 256-byte aligned matrices, as in the mapped file).
constexpr uint64_t kPartAlign = 256;

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// A tensor the family bound (a scale the file has), data or not.
bool bound(const WeightRef& w) { return !w.name.empty(); }

// The largest gate and up matrices: where up and down start in a window.
std::pair<uint64_t, uint64_t> part_offsets(const std::vector<RoutedExperts>& blocks) {
    uint64_t gate = 0, up = 0;
    for (const RoutedExperts& b : blocks) {
        gate = std::max(gate, align_up(b.gate.matrix_bytes, kPartAlign));
        up = std::max(up, align_up(b.up.matrix_bytes, kPartAlign));
    }
    return {gate, gate + up};
}


}  // namespace

uint64_t ExpertWindowSource::window_bytes_for(const std::vector<RoutedExperts>& blocks) {
    const auto [up, down] = part_offsets(blocks);
    uint64_t d = 0;
    for (const RoutedExperts& b : blocks) d = std::max(d, b.down.matrix_bytes);
    return blocks.empty() ? 0 : down + d;
}

ExpertWindowSource::ExpertWindowSource(Backend& backend, ModelMap& map, const std::vector<RoutedExperts>& blocks,
                                       const ExpertWindowOptions& options)
    : blocks_(blocks) {
    std::tie(up_offset_, down_offset_) = part_offsets(blocks_);
    content_bytes_ = window_bytes_for(blocks_);
    int64_t total = 0;
    for (const RoutedExperts& b : blocks_) {
        Block x;
        x.experts = &b;
        x.first = total;
        total += b.n_expert();
        index_.push_back(x);
    }
    if (total == 0) throw Error("expert windows: this model (slice) has no routed experts.");
    if (options.device_slots < 0)
        throw Error("expert windows: a device budget of " + std::to_string(options.device_slots) + " experts is negative.");
    const int64_t slots = std::min(options.device_slots, total);
    // One window of slack past the last expert: a block's up and down views
    // start inside its first window and span n_expert strides.
    windows_ = backend.expert_windows(total + 1, content_bytes_, slots);
    if (!windows_) throw Error("expert windows: the " + backend.name() + " backend has none.");
    WindowPolicyOptions po = options.policy;
    po.windows = total + 1;
    po.slots = slots;
    policy_ = std::make_unique<WindowPolicy>(po);
    counts_ = backend.alloc_ints(total + 1);
    zeros_.assign(size_t(total + 1), 0);
    host_counts_.assign(size_t(total + 1), 0);
    totals_.assign(size_t(total + 1), 0);
    backend.upload_ints(counts_, zeros_.data());
    fill(backend, map);
}

ExpertWindowSource::~ExpertWindowSource() = default;

// Every expert's gate, up and down read from the file a tensor at a time
// (three long reads a block, the disk's best pattern) and written into the
// windows' host memory.
void ExpertWindowSource::fill(Backend& backend, ModelMap& map) {
    const auto t0 = std::chrono::steady_clock::now();
    ExpertReader reader(map.file().path());
    StagingBuffer staging(backend);
    size_t n_scales = 0;
    for (const Block& b : index_)
        for (const WeightRef* s : {&b.experts->gate_scale, &b.experts->up_scale, &b.experts->down_scale})
            if (bound(*s) && !s->data) n_scales += size_t(s->ne[0]);
    scale_values_.resize(n_scales);
    size_t next_scale = 0;
    for (Block& b : index_) {
        const RoutedExperts& r = *b.experts;
        const WeightRef* parts[3] = {&r.gate, &r.up, &r.down};
        const uint64_t at[3] = {0, up_offset_, down_offset_};
        for (int k = 0; k < 3; ++k) {
            const WeightRef& w = *parts[k];
            const uint64_t bytes = w.matrix_bytes * uint64_t(r.n_expert());
            uint8_t* buf = staging.get(bytes);
            reader.read(w.offset, bytes, buf, "'" + w.name + "'");
            for (int64_t e = 0; e < r.n_expert(); ++e)
                windows_->write(b.first + e, at[k], buf + uint64_t(e) * w.matrix_bytes, w.matrix_bytes);
            backend.synchronize();  // the writes are done with the staging buffer
            fill_bytes_ += bytes;
        }
        const WeightRef* scales[3] = {&r.gate_scale, &r.up_scale, &r.down_scale};
        for (int k = 0; k < 3; ++k) {
            if (!bound(*scales[k])) continue;
            b.scales[k] = *scales[k];
            if (scales[k]->data) continue;  // the model map holds it
            const size_t n = size_t(scales[k]->ne[0]);
            reader.read(scales[k]->offset, n * sizeof(float), reinterpret_cast<uint8_t*>(scale_values_.data() + next_scale),
                        "'" + scales[k]->name + "'");
            b.scales[k].data = reinterpret_cast<const uint8_t*>(scale_values_.data() + next_scale);
            next_scale += n;
        }
    }
    // The scales read here, where the ops read weights (after they are
    // written: a device copy is made now).
    if (!scale_values_.empty())
        backend.attach_buffer(reinterpret_cast<const uint8_t*>(scale_values_.data()), scale_values_.size() * sizeof(float));
    fill_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    stats_.bytes_read = fill_bytes_;
    stats_.read_seconds = fill_seconds_;
    stats_.miss_reads = reader.reads();
}

const ExpertWindowSource::Block* ExpertWindowSource::block_of(int layer) const {
    for (const Block& b : index_)
        if (b.experts->layer == layer) return &b;
    return nullptr;
}

bool ExpertWindowSource::on_device(int layer, int64_t expert) const {
    const Block* b = block_of(layer);
    return b && expert >= 0 && expert < b->experts->n_expert() && policy_->slot_of(b->first + expert) >= 0;
}

ExpertMatrices ExpertWindowSource::resolve(Backend& backend, const RoutedExperts& block, Routing& routing) {
    const Block* b = block_of(block.layer);
    if (!b) throw Error("expert windows: block " + std::to_string(block.layer) + " has no windows in this process.");
    IntArray counts = counts_;
    counts.data += b->first;
    counts.n = block.n_expert();
    backend.count_experts(routing, counts);
    counting_ = true;
    uint8_t* first = windows_->base() + uint64_t(b->first) * windows_->stride();
    auto view = [&](const WeightRef& w, uint64_t offset) {
        WeightRef v = w;
        v.data = first + offset;
        v.matrix_bytes = windows_->stride();
        v.offset = 0;
        return v;
    };
    ExpertMatrices m;
    m.gate = view(block.gate, 0);
    m.up = view(block.up, up_offset_);
    m.down = view(block.down, down_offset_);
    m.gate_scale = b->scales[0];
    m.up_scale = b->scales[1];
    m.down_scale = b->scales[2];
    return m;
}

void ExpertWindowSource::between_steps(Backend& backend) {
    if (!counting_) return;
    backend.synchronize();
    backend.download_ints(counts_, host_counts_.data());
    backend.upload_ints(counts_, zeros_.data());
    {
        std::lock_guard<std::mutex> lock(stats_mu_);
        for (const Block& b : index_)
            for (int64_t e = 0; e < b.experts->n_expert(); ++e) {
                if (host_counts_[size_t(b.first + e)] == 0) continue;
                totals_[size_t(b.first + e)] += uint64_t(host_counts_[size_t(b.first + e)]);
                ++stats_.lookups;
                if (policy_->slot_of(b.first + e) >= 0) {
                    ++stats_.hits;
                } else {
                    ++stats_.misses;
                    ++stats_.host_hits;
                }
            }
    }
    apply(backend, policy_->step(host_counts_.data()));
}

void ExpertWindowSource::apply(Backend& backend, const WindowMoves& moves) {
    if (moves.empty()) return;
    backend.synchronize();
    windows_->rebind(moves.demote, moves.promote);
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.evictions += moves.demote.size();
    stats_.promotions += moves.promote.size();
}

void ExpertWindowSource::preload(Backend& backend, const std::vector<std::pair<int, int64_t>>& experts) {
    std::vector<int64_t> windows;
    for (const auto& [layer, e] : experts)
        if (const Block* b = block_of(layer); b && e >= 0 && e < b->experts->n_expert()) windows.push_back(b->first + e);
    apply(backend, policy_->preload(windows));
}

ExpertCounts ExpertWindowSource::routing_counts() const {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ExpertCounts out;
    for (const Block& b : index_)
        for (int64_t e = 0; e < b.experts->n_expert(); ++e)
            if (const uint64_t n = totals_[size_t(b.first + e)]) out.push_back({{b.experts->layer, e}, n});
    return out;
}

std::string ExpertWindowSource::describe() const {
    const double stride = double(windows_->stride());
    char line[400];
    std::snprintf(line, sizeof line,
                  "experts: %lld windows of %.1f MiB (%.1f MiB of experts each), %s in page-locked host memory read "
                  "where it lies; %lld device slots (%s) for the most used; filled from the file in %.1f s (%.2f GB/s)",
                  static_cast<long long>(windows_->size() - 1), stride / double(1 << 20),
                  double(content_bytes_) / double(1 << 20), gib_text(stride * double(windows_->size())).c_str(),
                  static_cast<long long>(windows_->device_slots()),
                  gib_text(stride * double(windows_->device_slots())).c_str(), fill_seconds_,
                  fill_seconds_ > 0 ? double(fill_bytes_) / fill_seconds_ / 1e9 : 0.0);
    return line;
}

ExpertSourceStats ExpertWindowSource::stats() const {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return stats_;
}

std::string ExpertWindowSource::stats_line() const {
    const ExpertSourceStats s = stats();
    if (s.lookups == 0) return {};
    char line[320];
    std::snprintf(line, sizeof line,
                  "expert windows: %llu lookups, %.1f%% on the device, %.1f%% read from host memory; %llu promoted, "
                  "%llu demoted; %lld of %lld slots in use",
                  static_cast<unsigned long long>(s.lookups), 100.0 * double(s.hits) / double(s.lookups),
                  100.0 * double(s.misses) / double(s.lookups), static_cast<unsigned long long>(s.promotions),
                  static_cast<unsigned long long>(s.evictions), static_cast<long long>(policy_->promoted()),
                  static_cast<long long>(windows_->device_slots()));
    return line;
}

}  // namespace ds4

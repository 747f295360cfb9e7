#include "experts/expert_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "mapping/model_identity.h"
#include "mapping/model_map.h"

namespace ds4 {

namespace {

// Slot parts start on this boundary, so a matrix in a slot is aligned as
// well as one in the mapped file (the vectorised row loads assume it).
constexpr uint64_t kSlotAlign = 256;
static_assert(kPackPartAlign % kSlotAlign == 0, "a pack's record read into a slot keeps its parts aligned");

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
uint8_t* map_anonymous(uint64_t bytes, const char* what) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        throw Error("cannot reserve " + std::to_string(bytes >> 20) + " MiB for the expert cache's " + what + ".");
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

const char* strategy_name(PrefillStrategy s) {
    switch (s) {
        case PrefillStrategy::per_expert: return "per-expert";
        case PrefillStrategy::full_layer: return "full-layer";
        default: return "automatic";
    }
}

// Offsets of a block's gate, up, down tensors and three scale arrays in
// the layer buffer.
struct LayerParts {
    uint64_t at[6] = {};
    uint64_t end = 0;
};

LayerParts layer_parts(const RoutedExperts& b) {
    LayerParts p;
    const WeightRef* w[3] = {&b.gate, &b.up, &b.down};
    for (int k = 0; k < 3; ++k) {
        p.at[k] = p.end;
        p.end = align_up(p.end + w[k]->matrix_bytes * uint64_t(b.n_expert()), kSlotAlign);
    }
    const WeightRef* s[3] = {&b.gate_scale, &b.up_scale, &b.down_scale};
    for (int k = 0; k < 3; ++k) {
        p.at[3 + k] = p.end;
        if (bound(*s[k])) p.end = align_up(p.end + uint64_t(s[k]->ne[0]) * sizeof(float), kSlotAlign);
    }
    return p;
}

}  // namespace

uint64_t ExpertCache::slot_bytes_for(const std::vector<RoutedExperts>& blocks) {
    uint64_t bytes = 0;
    for (const RoutedExperts& b : blocks)
        bytes = std::max(bytes, align_up(b.gate.matrix_bytes, kSlotAlign) + align_up(b.up.matrix_bytes, kSlotAlign) +
                                    align_up(b.down.matrix_bytes, kSlotAlign));
    return bytes;
}

ExpertCache::ExpertCache(Backend& backend, ModelMap& map, const std::vector<RoutedExperts>& blocks,
                         const ExpertCacheOptions& options)
    : blocks_(blocks),
      reader_(map.file().path(), options.reader),
      options_(options),
      staging_(backend),
      slot_bytes_(slot_bytes_for(blocks)) {
    if (options.slots < 0) throw Error("the expert cache needs a slot count of 0 (every expert) or more, not " +
                                       std::to_string(options.slots) + ".");  // before any read
    if (!options.pack.empty() && !blocks_.empty()) {
        pack_ = std::make_unique<ExpertPack>(ExpertPack::open(options.pack));
        pack_->check_matches(model_identity(map.file()), blocks_);
        pack_reader_ = std::make_unique<ExpertReader>(options.pack, options.reader);
        // A record is read whole into a slot: the slots are as long as the
        // longest record of these blocks.
        for (const RoutedExperts& b : blocks_) slot_bytes_ = std::max(slot_bytes_, pack_->block(b.layer)->record_bytes);
    }
    size_t n_scaled = 0;
    std::vector<PolicyBlock> policy_blocks;
    for (const RoutedExperts& b : blocks_) {
        BlockLayout& L = layout_[b.layer];
        L.block = &b;
        L.up_offset = align_up(b.gate.matrix_bytes, kSlotAlign);
        L.down_offset = L.up_offset + align_up(b.up.matrix_bytes, kSlotAlign);
        if (pack_) {
            // The record's layout is the slot's (gate at 0; kPackPartAlign
            // is kSlotAlign, checked below).
            const PackBlock& p = *pack_->block(b.layer);
            L.pack = &p;
            L.up_offset = p.part(PackPart::up)->offset;
            L.down_offset = p.part(PackPart::down)->offset;
        }
        const WeightRef* scale[3] = {&b.gate_scale, &b.up_scale, &b.down_scale};
        bool scaled = false;
        for (int k = 0; k < 3; ++k) {
            if (!bound(*scale[k])) continue;
            // A few floats per block: kept on the host, copied to a slot's
            // scale when its expert is loaded.
            L.scale_values[k].resize(size_t(scale[k]->ne[0]));
            reader_.read(scale[k]->offset, L.scale_values[k].size() * sizeof(float),
                         reinterpret_cast<uint8_t*>(L.scale_values[k].data()), "'" + scale[k]->name + "'");
            scaled = true;
        }
        L.scales = scaled ? n_scaled++ : std::numeric_limits<size_t>::max();
        policy_blocks.push_back(PolicyBlock{b.layer, b.n_expert()});
    }
    reads_in_place_ = backend.reads_attached_buffers_in_place();
    CachePolicyOptions po;
    po.slots = options.slots;
    po.experts_per_token = options.experts_per_token;
    // A host tier only where the device slots are not host memory already
    // (the policy adds: and do not hold every expert).
    po.host_slots = reads_in_place_ ? 0 : options.host_slots;
    po.half_life_steps = options.half_life_steps;
    po.prefill = options.prefill;
    policy_ = std::make_unique<CachePolicy>(policy_blocks, po);
    n_slots_ = policy_->slots();
    n_scratch_ = policy_->scratch_slots();
    if (!options.trace_out.empty())
        trace_ = std::make_unique<RoutingTraceWriter>(options.trace_out, "ds4 run of model " + model_identity(map.file()),
                                                      policy_blocks, options.experts_per_token);
    const int64_t capacity = n_slots_ + n_scratch_;
    if (capacity == 0) return;  // a slice without MoE blocks
    if (policy_->host_slots() > 0) host_ = std::make_unique<HostTier>(backend, policy_->host_slots(), slot_bytes_);
    if (host_ && host_->slots() >= policy_->total_experts()) warm_host_tier();
    // One slot of slack: a block's up and down views start inside slot 0 and
    // span `capacity` strides, so their last matrix ends past the table.
    bytes_size_ = checked_product(uint64_t(capacity) + 1, slot_bytes_);
    bytes_ = map_anonymous(bytes_size_, "slots");
    backend.attach_buffer(bytes_, bytes_size_);
    if (options.overlap && reads_in_place_ && backend.computes_experts_as_they_arrive()) {
        worker_ = std::make_unique<ReadWorker>();
        // Two tokens' experts read ahead; not when the slots hold every
        // expert (nothing is missed after the first use).
        if (options.lookahead && options.experts_per_token > 0 && n_slots_ < policy_->total_experts()) {
            n_ahead_ = 2 * options.experts_per_token;
            ahead_size_ = checked_product(uint64_t(n_ahead_), slot_bytes_);
            ahead_ = map_anonymous(ahead_size_, "lookahead buffer");
            ahead_expert_.assign(size_t(n_ahead_), -1);
        }
    }
    if (n_scaled > 0) {
        scales_size_ = checked_product(checked_product(n_scaled, 3), uint64_t(capacity) * sizeof(float));
        scales_ = reinterpret_cast<float*>(map_anonymous(scales_size_, "scales"));
        backend.attach_buffer(reinterpret_cast<uint8_t*>(scales_), scales_size_);
    }
}

ExpertCache::~ExpertCache() {
    settle(false);  // no read may still write into the slots
    if (bytes_) munmap(bytes_, bytes_size_);
    if (scales_) munmap(scales_, scales_size_);
    if (layer_) munmap(layer_, layer_size_);
    if (ahead_) munmap(ahead_, ahead_size_);
}

std::string ExpertCache::host_text() const {
    if (!host_) return "";
    char b[128];
    std::snprintf(b, sizeof b, "; host tier of %lld slots (%.2f GiB, %s%s)", static_cast<long long>(host_->slots()),
                  double(host_->bytes()) / double(uint64_t{1} << 30), host_->page_locked() ? "page-locked" : "pageable",
                  host_->slots() >= policy_->total_experts() ? ", every expert, read at start" : "");
    return b;
}

std::string ExpertCache::describe() const {
    char line[320];
    std::snprintf(line, sizeof line, "experts: cache of %lld slots (+%lld scratch) x %.2f MiB (%.2f GiB)%s, read from ",
                  static_cast<long long>(n_slots_), static_cast<long long>(n_scratch_), double(slot_bytes_) / double(1 << 20),
                  double(n_slots_ + n_scratch_) * double(slot_bytes_) / double(uint64_t{1} << 30), host_text().c_str());
    const std::string source = pack_ ? "the expert pack " + pack_->path() + ", one read per expert," : "the file";
    return line + source + " on a miss (" + (pack_ ? pack_reader_.get() : &reader_)->describe() + (worker_ ? ", while the step computes its hits" : "") +
           (n_ahead_ ? ", " + std::to_string(n_ahead_) + " read ahead on the router's lookahead" : std::string()) +
           "); prefill " + strategy_name(options_.prefill);
}

ExpertSourceStats ExpertCache::stats() const {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ExpertSourceStats s = policy_->counts();
    s.full_layer_reads = stats_.full_layer_reads;
    s.miss_reads = stats_.miss_reads;
    s.stall_seconds = stats_.stall_seconds;
    s.background_loads = stats_.background_loads;
    s.lookahead_reads = stats_.lookahead_reads;
    s.lookahead_hits = stats_.lookahead_hits;
    s.bytes_read = reader_.bytes_read() + (pack_reader_ ? pack_reader_->bytes_read() : 0);
    s.read_seconds = reader_.wait_seconds() + (pack_reader_ ? pack_reader_->wait_seconds() : 0);
    return s;
}

std::string ExpertCache::stats_line() const {
    const ExpertSourceStats s = stats();
    char line[640];
    std::snprintf(line, sizeof line,
                  "experts: %llu lookups, %llu hits (%.1f%%), %llu misses (%llu from the host tier, %llu to scratch, "
                  "%llu evictions; %llu read requests), %llu full-layer reads; %.2f GiB read in %.2f s (%.2f GB/s), "
                  "steps waited %.2f s; %llu read ahead, %llu of them used",
                  static_cast<unsigned long long>(s.lookups), static_cast<unsigned long long>(s.hits),
                  s.lookups ? 100.0 * double(s.hits) / double(s.lookups) : 0.0,
                  static_cast<unsigned long long>(s.misses), static_cast<unsigned long long>(s.host_hits),
                  static_cast<unsigned long long>(s.scratch_loads),
                  static_cast<unsigned long long>(s.evictions), static_cast<unsigned long long>(s.miss_reads),
                  static_cast<unsigned long long>(s.full_layer_reads),
                  double(s.bytes_read) / double(uint64_t{1} << 30), s.read_seconds,
                  s.read_seconds > 0 ? double(s.bytes_read) / s.read_seconds / 1e9 : 0.0, s.stall_seconds,
                  static_cast<unsigned long long>(s.lookahead_reads), static_cast<unsigned long long>(s.lookahead_hits));
    return line;
}

// The misses of the step in flight on the read worker, as the MoE op sees
// them: their slots are pending until the reads are done.
class ExpertCache::Arrival final : public ExpertArrival {
public:
    Arrival(ExpertCache& cache, std::vector<bool> pending) : cache_(cache), pending_(std::move(pending)) {}
    bool pending(int32_t m) const override { return !done_ && m >= 0 && size_t(m) < pending_.size() && pending_[size_t(m)]; }
    void wait() override {
        if (done_) return;
        done_ = true;
        cache_.settle(true);
    }

private:
    ExpertCache& cache_;
    std::vector<bool> pending_;  // by slot
    bool done_ = false;
};

ExpertMatrices ExpertCache::resolve(Backend& backend, const RoutedExperts& block, Routing& routing) {
    // The previous step's reads, if its MoE op never waited for them (the
    // step failed before it): done, or forgotten, before any slot changes.
    settle(false);
    std::lock_guard<std::mutex> lock(stats_mu_);
    const auto lay = layout_.find(block.layer);
    if (lay == layout_.end())
        throw Error("the expert cache was not built for block " + std::to_string(block.layer) + ".");
    const BlockLayout& L = lay->second;
    const int64_t n = routing.rows * routing.n_used;
    std::vector<int32_t> ids(static_cast<size_t>(n));
    backend.download_ints(routing.experts, ids.data());
    const SlotPlan plan = policy_->plan(block.layer, ids, routing.rows);
    // The routing as planned (ids checked), before any read can fail: a
    // replay of the trace makes the same decisions in the same order.
    if (trace_) trace_->record(block.layer, routing.rows, routing.n_used, ids);
    if (plan.whole) {
        ahead_layer_ = -1;
        return timed([&] { return full_layer(backend, L); });
    }
    if (worker_ && !plan.loads.empty()) {
        // The MoE op computes the hits while the worker reads the misses.
        in_flight_ = std::make_unique<MissReads>(prepare_load(backend, L, plan.loads));
        std::vector<bool> pending(size_t(n_slots_ + n_scratch_), false);
        for (const auto& [slot, expert] : plan.loads) pending[size_t(slot)] = true;
        ++stats_.background_loads;
        worker_->start([this, &backend] { read_misses(backend, *in_flight_); });
        routing.arrival = std::make_shared<Arrival>(*this, std::move(pending));
    } else {
        timed([&] { load(backend, L, plan.loads); return 0; });
    }
    for (int32_t& id : ids) id = plan.slot_of.at(id);
    backend.upload_ints(routing.experts, ids.data());
    return slot_matrices(L);
}

template <class F>
auto ExpertCache::timed(F&& f) -> decltype(f()) {
    const auto t0 = std::chrono::steady_clock::now();
    struct Add {
        double& to;
        std::chrono::steady_clock::time_point t0;
        ~Add() { to += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
    } add{stats_.stall_seconds, t0};
    return f();
}

void ExpertCache::settle(bool rethrow) {
    if (!in_flight_) return;
    const auto t0 = std::chrono::steady_clock::now();
    std::exception_ptr error;
    try {
        worker_->wait();
    } catch (...) {
        error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.stall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Those slots hold partial bytes now: forget them, so a later step
    // reads the experts again instead of computing with garbage.
    const bool guess = in_flight_->lookahead;
    if (error && guess) ahead_layer_ = -1;  // a guess that could not be read: the step reads for itself
    else if (error) policy_->forget(in_flight_->layout->block->layer, in_flight_->loads, in_flight_->host);
    in_flight_.reset();
    if (error && rethrow && !guess) std::rethrow_exception(error);
}

void ExpertCache::load(Backend& backend, const BlockLayout& L, const std::vector<std::pair<int64_t, int64_t>>& loads) {
    if (loads.empty()) return;
    const MissReads m = prepare_load(backend, L, loads);
    try {
        read_misses(backend, m);
    } catch (...) {
        policy_->forget(L.block->layer, loads, m.host);
        throw;
    }
}

ExpertCache::MissReads ExpertCache::prepare_load(Backend& backend, const BlockLayout& L,
                                                 const std::vector<std::pair<int64_t, int64_t>>& loads) {
    const RoutedExperts& b = *L.block;
    MissReads m;
    m.layout = &L;
    m.loads = loads;
    // Where each miss's bytes come from on their way to its slot: the host
    // tier (a hit there, or a slot it gives for the read), the staging
    // buffer, or (the CPU) the slot itself.
    m.source.assign(loads.size(), nullptr);
    m.read_into.assign(loads.size(), nullptr);
    m.host = policy_->plan_host(b.layer, loads);
    size_t staged = 0;
    // Read ahead for this block: copied, not read (the copy runs where the
    // reads would, so the slot is pending until then).
    auto read_ahead = [&](int64_t expert) -> const uint8_t* {
        if (ahead_layer_ != b.layer) return nullptr;
        for (size_t k = 0; k < ahead_expert_.size(); ++k)
            if (ahead_expert_[k] == expert) return ahead_ + uint64_t(k) * slot_bytes_;
        return nullptr;
    };
    for (size_t i = 0; i < loads.size(); ++i) {
        const int64_t slot = loads[i].first;
        if (const uint8_t* ahead = reads_in_place_ ? read_ahead(loads[i].second) : nullptr) {
            m.source[i] = ahead;
            ++stats_.lookahead_hits;
        } else if (reads_in_place_) {
            m.read_into[i] = bytes_ + uint64_t(slot) * slot_bytes_;
        } else if (m.host.route[i] == HostRoute::hit) {
            m.source[i] = host_->slot(m.host.slot[i]);
        } else if (m.host.route[i] == HostRoute::claimed) {
            m.source[i] = m.read_into[i] = host_->slot(m.host.slot[i]);
        } else {
            ++staged;
        }
    }
    ahead_layer_ = -1;  // used up: the next prefetch refills the buffer
    uint8_t* stage = staged ? staging_.get(staged * slot_bytes_) : nullptr;
    for (size_t i = 0, k = 0; i < loads.size(); ++i) {
        if (!m.read_into[i] && !m.source[i]) m.source[i] = m.read_into[i] = stage + (k++) * slot_bytes_;
        if (m.read_into[i]) append_reads(L, loads[i].second, m.read_into[i], m.reads);
    }
    stats_.miss_reads += m.reads.size();
    // The scales are the host's already: in place before any read.
    const int64_t capacity = n_slots_ + n_scratch_;
    for (const auto& [slot, expert] : loads) {
        for (int k = 0; k < 3; ++k) {
            const std::vector<float>& v = L.scale_values[k];
            if (v.empty()) continue;
            const bool per_expert = v.size() > 1;
            float* dst = scales_ + (L.scales * 3 + size_t(k)) * size_t(capacity) + (per_expert ? size_t(slot) : 0);
            backend.write_weights(reinterpret_cast<uint8_t*>(dst),
                                  reinterpret_cast<const uint8_t*>(&v[per_expert ? size_t(expert) : 0]), sizeof(float));
        }
    }
    return m;
}

void ExpertCache::append_reads(const BlockLayout& L, int64_t expert, uint8_t* into,
                               std::vector<ExpertReader::Request>& reads) const {
    const RoutedExperts& b = *L.block;
    if (L.pack) {
        // One aligned read of the whole record: gate, up, down (and the
        // per-expert scales, unused here: the cache keeps them from the GGUF).
        reads.push_back({L.pack->record_offset(expert), L.pack->record_bytes, into,
                         "expert " + std::to_string(expert) + " of block " + std::to_string(b.layer)});
        return;
    }
    const std::pair<const WeightRef*, uint64_t> parts[3] = {{&b.gate, 0}, {&b.up, L.up_offset}, {&b.down, L.down_offset}};
    for (const auto& [w, at] : parts)
        reads.push_back({w->offset + uint64_t(expert) * w->matrix_bytes, w->matrix_bytes, into + at,
                         "expert " + std::to_string(expert) + " of '" + w->name + "'"});
}

void ExpertCache::prefetch(Backend& backend, const RoutedExperts& next, const Routing& guess) {
    if (n_ahead_ == 0) return;
    settle(false);  // this block's reads are done: its MoE op waited for them
    std::lock_guard<std::mutex> lock(stats_mu_);
    const auto lay = layout_.find(next.layer);
    if (lay == layout_.end()) return;
    const BlockLayout& L = lay->second;
    std::vector<int32_t> ids(size_t(guess.rows * guess.n_used));
    backend.download_ints(guess.experts, ids.data());
    // The experts guessed most often first (ties: the first guessed), those
    // the slots do not hold, as many as the buffer takes.
    std::vector<std::pair<int32_t, int32_t>> chosen;  // (expert, times guessed)
    for (const int32_t e : ids) {
        if (e < 0 || e >= next.n_expert() || policy_->holds(next.layer, e)) continue;
        auto it = std::find_if(chosen.begin(), chosen.end(), [&](const auto& c) { return c.first == e; });
        if (it == chosen.end()) chosen.push_back({e, 1});
        else ++it->second;
    }
    std::stable_sort(chosen.begin(), chosen.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    if (int64_t(chosen.size()) > n_ahead_) chosen.resize(size_t(n_ahead_));
    ahead_layer_ = -1;
    std::fill(ahead_expert_.begin(), ahead_expert_.end(), -1);
    if (chosen.empty()) return;
    auto m = std::make_unique<MissReads>();
    m->layout = &L;
    m->lookahead = true;
    for (size_t k = 0; k < chosen.size(); ++k) {
        ahead_expert_[k] = chosen[k].first;
        m->loads.push_back({int64_t(k), chosen[k].first});
        m->source.push_back(nullptr);
        m->read_into.push_back(ahead_ + uint64_t(k) * slot_bytes_);
        append_reads(L, chosen[k].first, m->read_into.back(), m->reads);
    }
    ahead_layer_ = next.layer;
    stats_.lookahead_reads += chosen.size();
    in_flight_ = std::move(m);
    worker_->start([this, &backend] { read_misses(backend, *in_flight_); });
}

void ExpertCache::read_misses(Backend& backend, const MissReads& m) {
    const BlockLayout& L = *m.layout;
    if (L.pack) {
        pack_reader_->read_all(m.reads);
        // A damaged record is an error for this step, never a wrong token.
        for (size_t i = 0, r = 0; i < m.loads.size(); ++i) {
            if (!m.read_into[i]) continue;
            if (!pack_->record_intact(*L.pack, m.loads[i].second, m.read_into[i]))
                throw Error("reading " + m.reads[r].what + " from " + pack_->path() +
                            " failed: the record does not match its checksum (the pack is damaged; pack the model again).");
            ++r;
        }
    } else {
        reader_.read_all(m.reads);
    }
    for (size_t i = 0; i < m.loads.size(); ++i)
        if (m.source[i]) backend.write_weights(bytes_ + uint64_t(m.loads[i].first) * slot_bytes_, m.source[i], slot_bytes_);
}

ExpertMatrices ExpertCache::slot_matrices(const BlockLayout& L) const {
    const RoutedExperts& block = *L.block;
    const int64_t capacity = n_slots_ + n_scratch_;
    ExpertMatrices m;
    m.gate = slot_view(block.gate, bytes_, slot_bytes_, capacity);
    m.up = slot_view(block.up, bytes_ + L.up_offset, slot_bytes_, capacity);
    m.down = slot_view(block.down, bytes_ + L.down_offset, slot_bytes_, capacity);
    const WeightRef* scale[3] = {&block.gate_scale, &block.up_scale, &block.down_scale};
    WeightRef* out[3] = {&m.gate_scale, &m.up_scale, &m.down_scale};
    for (int k = 0; k < 3; ++k) {
        if (!bound(*scale[k])) continue;
        WeightRef s = *scale[k];
        s.data = reinterpret_cast<const uint8_t*>(scales_ + (L.scales * 3 + size_t(k)) * size_t(capacity));
        if (s.ne[0] > 1) s.ne[0] = capacity;  // one value per slot; a single value applies to all
        s.offset = 0;
        *out[k] = s;
    }
    return m;
}

void ExpertCache::read_block(const RoutedExperts& b, const uint64_t* at, uint8_t* base) {
    const WeightRef* w[3] = {&b.gate, &b.up, &b.down};
    std::vector<ExpertReader::Request> reads;
    for (int k = 0; k < 3; ++k)
        reads.push_back({w[k]->offset, w[k]->matrix_bytes * uint64_t(b.n_expert()), base + at[k], "'" + w[k]->name + "'"});
    reader_.read_all(reads);
}

ExpertMatrices ExpertCache::full_layer(Backend& backend, const BlockLayout& L) {
    const RoutedExperts& b = *L.block;
    const LayerParts parts = layer_parts(b);
    if (!layer_) {
        // Sized for the largest block, mapped on the first step that needs
        // it (a decode-only run with a fitting cache never does).
        for (const RoutedExperts& o : blocks_) layer_size_ = std::max(layer_size_, layer_parts(o).end);
        layer_ = map_anonymous(layer_size_, "layer buffer");
        backend.attach_buffer(layer_, layer_size_);
    }
    if (layer_holds_ != b.layer) {
        layer_holds_ = -1;
        uint8_t* base = reads_in_place_ ? layer_ : staging_.get(parts.at[3]);
        read_block(b, parts.at, base);
        if (!reads_in_place_) backend.write_weights(layer_, base, parts.at[3]);
        for (int k = 0; k < 3; ++k) {
            const std::vector<float>& v = L.scale_values[k];
            if (!v.empty())
                backend.write_weights(layer_ + parts.at[3 + k], reinterpret_cast<const uint8_t*>(v.data()),
                                      v.size() * sizeof(float));
        }
        layer_holds_ = b.layer;
        ++stats_.full_layer_reads;
    }
    ExpertMatrices m;
    WeightRef* out[6] = {&m.gate, &m.up, &m.down, &m.gate_scale, &m.up_scale, &m.down_scale};
    const WeightRef* in[6] = {&b.gate, &b.up, &b.down, &b.gate_scale, &b.up_scale, &b.down_scale};
    for (int k = 0; k < 6; ++k) {
        if (!bound(*in[k])) continue;
        WeightRef v = *in[k];
        v.data = layer_ + parts.at[k];
        v.offset = 0;
        *out[k] = v;
    }
    return m;
}

void ExpertCache::warm_host_tier() {
    // Every expert's host slot first (the policy's), then block by block,
    // three long reads each (the disk's best pattern), each expert's
    // matrices into its slot: a run whose experts all fit in RAM never
    // reads the file again.
    std::unordered_map<int, std::vector<int64_t>> host_slot;  // by layer, by expert
    policy_->fill_host([&](int layer, int64_t e, int64_t s) {
        std::vector<int64_t>& v = host_slot[layer];
        if (v.size() <= size_t(e)) v.resize(size_t(e) + 1, -1);
        v[size_t(e)] = s;
    });
    for (const RoutedExperts& b : blocks_) {
        const BlockLayout& L = layout_.at(b.layer);
        const LayerParts parts = layer_parts(b);
        uint8_t* stage = staging_.get(parts.at[3]);
        read_block(b, parts.at, stage);
        const WeightRef* w[3] = {&b.gate, &b.up, &b.down};
        const uint64_t at[3] = {0, L.up_offset, L.down_offset};
        for (int64_t e = 0; e < b.n_expert(); ++e) {
            uint8_t* slot = host_->slot(host_slot.at(b.layer).at(size_t(e)));
            for (int k = 0; k < 3; ++k)
                std::memcpy(slot + at[k], stage + parts.at[k] + uint64_t(e) * w[k]->matrix_bytes, w[k]->matrix_bytes);
        }
    }
}

void ExpertCache::preload(Backend& backend, const std::vector<std::pair<int, int64_t>>& experts) {
    settle(false);
    std::lock_guard<std::mutex> lock(stats_mu_);
    for (const auto& [layer, loads] : policy_->preload(experts)) load(backend, layout_.at(layer), loads);
}

ExpertCounts ExpertCache::routing_counts() const {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return policy_->routing_counts();
}

void ExpertCache::finish_trace() {
    std::lock_guard<std::mutex> lock(stats_mu_);
    if (trace_) trace_->finish();
}

}  // namespace ds4

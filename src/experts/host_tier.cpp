#include "experts/host_tier.h"

#include <cstdlib>

#include "common/error.h"

namespace ds4 {

namespace {

uint64_t key(int layer, int64_t expert) { return (uint64_t(uint32_t(layer)) << 32) | uint32_t(expert); }

}  // namespace

HostTier::HostTier(Backend& backend, int64_t slots, uint64_t slot_bytes)
    : backend_(backend), slot_bytes_(slot_bytes), bytes_(uint64_t(slots) * slot_bytes), slot_(size_t(slots)) {
    if (bytes_ == 0) return;
    base_ = backend_.alloc_host_staging(bytes_);
    pinned_ = base_ != nullptr;
    if (!base_) base_ = static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes_ + 4095) / 4096 * 4096));
    if (!base_)
        throw Error("cannot allocate " + std::to_string(bytes_ >> 20) + " MiB of host memory for the expert cache's host tier.");
}

HostTier::~HostTier() {
    if (pinned_) backend_.free_host_staging(base_);
    else std::free(base_);
}

const uint8_t* HostTier::find(int layer, int64_t expert, uint64_t tick) {
    const auto it = where_.find(key(layer, expert));
    if (it == where_.end()) return nullptr;
    slot_[size_t(it->second)].last_use = tick;
    return base_ + uint64_t(it->second) * slot_bytes_;
}

uint8_t* HostTier::claim(int layer, int64_t expert, uint64_t tick) {
    int64_t victim = -1;
    for (int64_t s = 0; s < int64_t(slot_.size()); ++s) {
        const Slot& c = slot_[size_t(s)];
        if (c.layer < 0) {
            victim = s;
            break;
        }
        if (c.last_use < tick && (victim < 0 || c.last_use < slot_[size_t(victim)].last_use)) victim = s;
    }
    if (victim < 0) return nullptr;
    Slot& v = slot_[size_t(victim)];
    if (v.layer >= 0) where_.erase(key(v.layer, v.expert));
    v = Slot{layer, expert, tick};
    where_[key(layer, expert)] = victim;
    return base_ + uint64_t(victim) * slot_bytes_;
}

void HostTier::forget(int layer, int64_t expert) {
    const auto it = where_.find(key(layer, expert));
    if (it == where_.end()) return;
    slot_[size_t(it->second)] = Slot{};
    where_.erase(it);
}

uint8_t* StagingBuffer::get(uint64_t bytes) {
    if (bytes <= size_) return data_;
    release();
    data_ = backend_.alloc_host_staging(bytes);
    pinned_ = data_ != nullptr;
    if (!data_) data_ = static_cast<uint8_t*>(std::malloc(bytes));
    if (!data_) throw Error("cannot allocate " + std::to_string(bytes >> 20) + " MiB of host memory to stage experts.");
    size_ = bytes;
    return data_;
}

void StagingBuffer::release() {
    if (pinned_) backend_.free_host_staging(data_);
    else std::free(data_);
    data_ = nullptr;
    size_ = 0;
}

}  // namespace ds4

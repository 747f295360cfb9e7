// The host-RAM tier of the expert cache, for backends that compute from
// their own memory (CUDA): experts evicted from or never admitted to the
// device slots stay in page-locked host memory, so a later miss is a copy
// over PCIe (tens of GB/s) instead of a read from the disk (one or a few).
// Every expert read from the file passes through this tier on its way to
// the device. Which expert a slot holds is the cache policy's
// (experts/cache_policy.h: least recently used first); this is the memory.
//
// Reuse is safe without events: a step overwrites host slots only after it
// read the routing back from the device, which waits for every copy issued
// before it (the backend's one stream).
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace ds4 {

class HostTier {
public:
    // `slots` slots of `slot_bytes`, page-locked by `backend` where it can.
    // Throws ds4::Error when the memory cannot be had.
    HostTier(Backend& backend, int64_t slots, uint64_t slot_bytes);
    ~HostTier();
    HostTier(const HostTier&) = delete;
    HostTier& operator=(const HostTier&) = delete;

    // Slot i's bytes.
    uint8_t* slot(int64_t i) const { return base_ + uint64_t(i) * slot_bytes_; }

    int64_t slots() const { return slots_; }
    uint64_t bytes() const { return bytes_; }
    bool page_locked() const { return pinned_; }

private:
    Backend& backend_;
    int64_t slots_;
    uint64_t slot_bytes_;
    uint64_t bytes_ = 0;
    uint8_t* base_ = nullptr;
    bool pinned_ = false;
};

// A host buffer that grows to the largest size asked, page-locked where the
// backend can: bytes on their way to the device when no tier slot takes them.
class StagingBuffer {
public:
    explicit StagingBuffer(Backend& backend) : backend_(backend) {}
    ~StagingBuffer() { release(); }
    StagingBuffer(const StagingBuffer&) = delete;
    StagingBuffer& operator=(const StagingBuffer&) = delete;
    uint8_t* get(uint64_t bytes);

private:
    void release();
    Backend& backend_;
    uint8_t* data_ = nullptr;
    uint64_t size_ = 0;
    bool pinned_ = false;
};

}  // namespace ds4

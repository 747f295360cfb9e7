// The host-RAM tier of the expert cache, for backends that compute from
// their own memory (CUDA): experts evicted from or never admitted to the
// device slots stay in page-locked host memory, so a later miss is a copy
// over PCIe (tens of GB/s) instead of a read from the disk (one or a few).
// Every expert read from the file passes through this tier on its way to
// the device. Least recently used first.
//
// Reuse is safe without events: a step overwrites host slots only after it
// read the routing back from the device, which waits for every copy issued
// before it (the backend's one stream).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

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

    // The slot holding (layer, expert), marked used at `tick`; null if none.
    const uint8_t* find(int layer, int64_t expert, uint64_t tick);
    // A slot for (layer, expert) to be filled now: the least recently used
    // one not used at `tick`; null when every slot is (the caller stages
    // the bytes elsewhere).
    uint8_t* claim(int layer, int64_t expert, uint64_t tick);
    // Drops (layer, expert): its slot holds partial bytes after a failed read.
    void forget(int layer, int64_t expert);

    int64_t slots() const { return int64_t(slot_.size()); }
    uint64_t bytes() const { return bytes_; }
    bool page_locked() const { return pinned_; }

private:
    struct Slot {
        int layer = -1;
        int64_t expert = -1;
        uint64_t last_use = 0;
    };
    Backend& backend_;
    uint64_t slot_bytes_;
    uint64_t bytes_ = 0;
    uint8_t* base_ = nullptr;
    bool pinned_ = false;
    std::vector<Slot> slot_;
    std::unordered_map<uint64_t, int64_t> where_;
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

#include "experts/host_tier.h"

#include <cstdlib>

#include "common/error.h"

namespace ds4 {

HostTier::HostTier(Backend& backend, int64_t slots, uint64_t slot_bytes)
    : backend_(backend), slots_(slots), slot_bytes_(slot_bytes), bytes_(uint64_t(slots) * slot_bytes) {
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

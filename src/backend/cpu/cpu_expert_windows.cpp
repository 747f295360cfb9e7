// The CPU's expert windows: the same mechanism as CUDA's (a fixed address
// range whose pages are re-pointed at another backing between steps), with
// Linux shared memory standing in for both tiers: the windows' host bytes in
// one memfd, the "device" slots in another, and a promotion mapping a slot's
// pages over the window (mmap MAP_FIXED). The CPU gains nothing from it (its
// two tiers are the same RAM); it exists so the windows' source runs, and is
// held to the resident logits bit for bit, where CI runs: a slot mapped at the
// wrong window, or filled with another window's bytes, changes the logits.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"

namespace ds4 {

namespace {

uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

uint64_t page_bytes() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

[[noreturn]] void fail(const std::string& what) {
    throw Error("expert windows: " + what + " failed (" + std::strerror(errno) + ").");
}

class CpuExpertWindows final : public ExpertWindows {
public:
    CpuExpertWindows(int64_t n, uint64_t bytes, int64_t slots) {
        n_ = n;
        slots_ = slots;
        stride_ = round_up(std::max<uint64_t>(bytes, 1), page_bytes());
        host_bytes_ = stride_ * uint64_t(n);
        slot_bytes_ = stride_ * uint64_t(std::max<int64_t>(slots, 1));
        host_fd_ = memfd_create("ds4-expert-windows", MFD_CLOEXEC);
        slot_fd_ = memfd_create("ds4-expert-slots", MFD_CLOEXEC);
        if (host_fd_ < 0 || slot_fd_ < 0) fail("memfd_create");
        if (ftruncate(host_fd_, off_t(host_bytes_)) != 0 || ftruncate(slot_fd_, off_t(slot_bytes_)) != 0)
            fail("sizing " + std::to_string(host_bytes_ >> 20) + " MiB of windows");
        host_view_ = map(nullptr, host_bytes_, PROT_READ | PROT_WRITE, 0, host_fd_, 0);
        slot_view_ = map(nullptr, slot_bytes_, PROT_READ | PROT_WRITE, 0, slot_fd_, 0);
        // The windows themselves: read-only views, the host bytes at first.
        base_ = map(nullptr, host_bytes_, PROT_READ, 0, host_fd_, 0);
    }
    ~CpuExpertWindows() override {
        for (auto [p, bytes] : {std::pair{base_, host_bytes_}, std::pair{host_view_, host_bytes_},
                                std::pair{slot_view_, slot_bytes_}})
            if (p) munmap(p, bytes);
        if (host_fd_ >= 0) close(host_fd_);
        if (slot_fd_ >= 0) close(slot_fd_);
    }

    void write(int64_t w, uint64_t offset, const uint8_t* src, uint64_t bytes) override {
        std::memcpy(host(w) + offset, src, bytes);
    }

    void rebind(const std::vector<int64_t>& demote, const std::vector<std::pair<int64_t, int64_t>>& promote) override {
        for (const int64_t w : demote) map(window(w), stride_, PROT_READ, MAP_FIXED, host_fd_, uint64_t(w) * stride_);
        for (const auto [w, s] : promote) {
            std::memcpy(slot_view_ + uint64_t(s) * stride_, host(w), stride_);
            map(window(w), stride_, PROT_READ, MAP_FIXED, slot_fd_, uint64_t(s) * stride_);
        }
    }

private:
    uint8_t* host(int64_t w) const { return host_view_ + uint64_t(w) * stride_; }
    uint8_t* window(int64_t w) const { return base_ + uint64_t(w) * stride_; }
    static uint8_t* map(void* at, uint64_t bytes, int prot, int flags, int fd, uint64_t offset) {
        void* p = mmap(at, bytes, prot, MAP_SHARED | flags, fd, off_t(offset));
        if (p == MAP_FAILED) fail("mapping " + std::to_string(bytes >> 10) + " KiB");
        return static_cast<uint8_t*>(p);
    }

    int host_fd_ = -1, slot_fd_ = -1;
    uint64_t host_bytes_ = 0, slot_bytes_ = 0;
    uint8_t* host_view_ = nullptr;
    uint8_t* slot_view_ = nullptr;
};

}  // namespace

uint64_t CpuBackend::expert_window_bytes(uint64_t bytes) const { return round_up(std::max<uint64_t>(bytes, 1), page_bytes()); }

std::unique_ptr<ExpertWindows> CpuBackend::make_expert_windows(int64_t n, uint64_t bytes, int64_t device_slots) {
    return std::make_unique<CpuExpertWindows>(n, bytes, device_slots);
}

}  // namespace ds4

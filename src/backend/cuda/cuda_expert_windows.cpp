// CUDA's expert windows (backend.h ExpertWindows) through the driver's
// virtual memory management: one reservation of the device's address space
// holds every window; each window's host memory is a page-locked allocation
// of its own (cuMemCreate with a host location) mapped there, so a kernel
// reads an expert the device does not hold over the host link, in the same
// launch that reads the others from device memory. Promoting an expert maps
// a device allocation (a slot, filled from the window first) at the same
// addresses; demoting maps the host memory back. Kernels and recorded steps
// keep their pointers: only the pages behind them change, between steps.
//
// The driver's functions come through the runtime's entry-point query, so
// nothing links libcuda directly (CI builds without a driver).
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "common/byte_size.h"
#include "common/error.h"

namespace ds4 {

namespace {

using cuda::check;

struct DriverVmm {
    CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long) = nullptr;
    CUresult (*release)(CUmemGenericAllocationHandle) = nullptr;
    CUresult (*reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
    CUresult (*free_va)(CUdeviceptr, size_t) = nullptr;
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) = nullptr;
    CUresult (*unmap)(CUdeviceptr, size_t) = nullptr;
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
    CUresult (*granularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) = nullptr;
    CUresult (*error_string)(CUresult, const char**) = nullptr;
};

template <class F>
void entry(const char* name, F*& f) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess || !p) {
        cudaGetLastError();
        throw Error(std::string("expert windows: the CUDA driver has no ") + name +
                    " (virtual memory management needs a driver for CUDA 12 or later).");
    }
    f = reinterpret_cast<F*>(p);
}

const DriverVmm& driver() {
    static const DriverVmm d = [] {
        DriverVmm v;
        entry("cuMemCreate", v.create);
        entry("cuMemRelease", v.release);
        entry("cuMemAddressReserve", v.reserve);
        entry("cuMemAddressFree", v.free_va);
        entry("cuMemMap", v.map);
        entry("cuMemUnmap", v.unmap);
        entry("cuMemSetAccess", v.set_access);
        entry("cuMemGetAllocationGranularity", v.granularity);
        entry("cuGetErrorString", v.error_string);
        return v;
    }();
    return d;
}

void ck(CUresult r, const std::string& what) {
    if (r == CUDA_SUCCESS) return;
    const char* s = nullptr;
    driver().error_string(r, &s);
    throw Error("expert windows: " + what + " failed (" + (s ? s : "CUDA driver error " + std::to_string(int(r))) + ").");
}

CUmemAllocationProp prop(CUmemLocationType where, int id) {
    CUmemAllocationProp p{};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = where;
    p.location.id = where == CU_MEM_LOCATION_TYPE_DEVICE ? id : 0;
    return p;
}

// The larger of the host and device allocation granularities: a window's
// size and alignment.
uint64_t window_granularity(int device) {
    const DriverVmm& d = driver();
    const CUmemAllocationProp host = prop(CU_MEM_LOCATION_TYPE_HOST, 0), dev = prop(CU_MEM_LOCATION_TYPE_DEVICE, device);
    size_t g_host = 0, g_dev = 0;
    ck(d.granularity(&g_host, &host, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "asking the host granularity");
    ck(d.granularity(&g_dev, &dev, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "asking the device granularity");
    return std::max<uint64_t>({g_host, g_dev, 1});
}

class CudaExpertWindows final : public ExpertWindows {
public:
    CudaExpertWindows(CudaBackend& backend, int device, int64_t n, uint64_t bytes, int64_t slots)
        : backend_(backend), alive_(backend.lifetime()), stream_(backend.stream()) {
        const DriverVmm& d = driver();
        const CUmemAllocationProp host = prop(CU_MEM_LOCATION_TYPE_HOST, 0), dev = prop(CU_MEM_LOCATION_TYPE_DEVICE, device);
        const uint64_t g = window_granularity(device);
        n_ = n;
        slots_ = slots;
        stride_ = (std::max<uint64_t>(bytes, 1) + g - 1) / g * g;
        access_[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access_[0].location.id = device;
        access_[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        try {
            CUdeviceptr va = 0;
            ck(d.reserve(&va, stride_ * uint64_t(n), g, 0, 0),
               "reserving " + gib_text(double(stride_ * uint64_t(n))) + " of addresses");
            base_ = reinterpret_cast<uint8_t*>(va);
            host_.resize(size_t(n));
            for (int64_t w = 0; w < n; ++w) {
                ck(d.create(&host_[size_t(w)], stride_, &host, 0),
                   "page-locking window " + std::to_string(w) + " of " + std::to_string(n) + " (" +
                       gib_text(double(stride_ * uint64_t(n))) + " of host memory)");
                ck(d.map(window(w), stride_, 0, host_[size_t(w)], 0), "mapping a window");
                mapped_.push_back(w);
                ck(d.set_access(window(w), stride_, access_, 1), "opening a window to the device");
            }
            if (slots > 0) {
                ck(d.reserve(&slot_va_, stride_ * uint64_t(slots), g, 0, 0), "reserving the slots' addresses");
                slot_.resize(size_t(slots));
                for (int64_t s = 0; s < slots; ++s) {
                    ck(d.create(&slot_[size_t(s)], stride_, &dev, 0),
                       "allocating slot " + std::to_string(s) + " of " + std::to_string(slots) + " (" +
                           gib_text(double(stride_ * uint64_t(slots))) + " of device memory)");
                    ck(d.map(slot_addr(s), stride_, 0, slot_[size_t(s)], 0), "mapping a slot");
                    ck(d.set_access(slot_addr(s), stride_, access_, 1), "opening a slot to the device");
                }
            }
            backend_.attach_window_range(base_, stride_ * uint64_t(n));
            attached_ = true;
        } catch (...) {
            release();
            throw;
        }
    }
    ~CudaExpertWindows() override {
        if (attached_ && !alive_.expired()) backend_.forget_window_range(base_);
        release();
    }

    void write(int64_t w, uint64_t offset, const uint8_t* src, uint64_t bytes) override {
        // In stream order; the caller synchronizes before it reuses `src`.
        check(cudaMemcpyAsync(reinterpret_cast<void*>(window(w) + offset), src, bytes, cudaMemcpyDefault, stream_),
              "writing an expert window");
    }

    void rebind(const std::vector<int64_t>& demote, const std::vector<std::pair<int64_t, int64_t>>& promote) override {
        check(cudaStreamSynchronize(stream_), "waiting before remapping expert windows");
        for (const int64_t w : demote) remap(w, host_[size_t(w)]);
        // Fill the slots from the windows' host memory (the copies run
        // together), then map them over the windows.
        for (const auto [w, s] : promote)
            check(cudaMemcpyAsync(reinterpret_cast<void*>(slot_addr(s)), reinterpret_cast<const void*>(window(w)), stride_,
                                  cudaMemcpyDefault, stream_),
                  "copying an expert into a device slot");
        check(cudaStreamSynchronize(stream_), "copying experts into device slots");
        for (const auto [w, s] : promote) remap(w, slot_[size_t(s)]);
    }

private:
    CUdeviceptr window(int64_t w) const { return reinterpret_cast<CUdeviceptr>(base_) + uint64_t(w) * stride_; }
    CUdeviceptr slot_addr(int64_t s) const { return slot_va_ + uint64_t(s) * stride_; }
    void remap(int64_t w, CUmemGenericAllocationHandle h) {
        const DriverVmm& d = driver();
        ck(d.unmap(window(w), stride_), "unmapping a window");
        ck(d.map(window(w), stride_, 0, h, 0), "remapping a window");
        ck(d.set_access(window(w), stride_, access_, 1), "opening a remapped window");
    }
    void release() {
        const DriverVmm& d = driver();
        // No kernel may still read a window (the backend's stream is gone
        // with the backend).
        if (!alive_.expired()) cudaStreamSynchronize(stream_);
        else cudaDeviceSynchronize();
        for (const int64_t w : mapped_) d.unmap(window(w), stride_);
        for (int64_t s = 0; s < int64_t(slot_.size()); ++s)
            if (slot_[size_t(s)]) d.unmap(slot_addr(s), stride_);
        for (auto h : host_)
            if (h) d.release(h);
        for (auto h : slot_)
            if (h) d.release(h);
        if (base_) d.free_va(reinterpret_cast<CUdeviceptr>(base_), stride_ * uint64_t(n_));
        if (slot_va_) d.free_va(slot_va_, stride_ * uint64_t(slots_));
        mapped_.clear();
        host_.clear();
        slot_.clear();
        base_ = nullptr;
        slot_va_ = 0;
    }

    CudaBackend& backend_;
    std::weak_ptr<int> alive_;  // the backend's: expired once it is gone
    cudaStream_t stream_;
    CUmemAccessDesc access_[1]{};
    std::vector<CUmemGenericAllocationHandle> host_, slot_;
    std::vector<int64_t> mapped_;  // windows with a mapping to undo
    CUdeviceptr slot_va_ = 0;
    bool attached_ = false;
};

}  // namespace

uint64_t CudaBackend::expert_window_bytes(uint64_t bytes) const {
    const uint64_t g = window_granularity(device_);
    return (std::max<uint64_t>(bytes, 1) + g - 1) / g * g;
}

std::unique_ptr<ExpertWindows> CudaBackend::make_expert_windows(int64_t n, uint64_t bytes, int64_t device_slots) {
    return std::make_unique<CudaExpertWindows>(*this, device_, n, bytes, device_slots);
}

}  // namespace ds4

// Kernel launches with programmatic dependent launch (Hopper): a kernel
// launched through launch() may be scheduled while the kernel before it on
// the stream is still finishing, and waits at its first statement
// (wait_for_inputs) until that kernel has completed and its writes are
// visible. A decode layer is ~17 dependent kernels of a few microseconds;
// without this each boundary costs the drain of one grid plus the launch of
// the next (also inside a replayed graph, where the edges become
// programmatic ones).
//
// Rule: every kernel launched through launch() calls wait_for_inputs()
// before it reads or writes any global memory. DS4_CUDA_PDL=0 launches
// without the attribute (A/B, and a way out if a driver misbehaves).
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/env_switch.h"

namespace ds4::cuda {

__device__ __forceinline__ void wait_for_inputs() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    // The kernel after this one may be scheduled from here on: its blocks
    // take their place on the SMs and wait in their own wait_for_inputs()
    // until this grid has completed. Without the trigger a grid counts as
    // triggered only when its last block exits, so the next grid's launch
    // still waited for the whole drain (PDL alone gave +0-2 %, 2026-12-02).
    // After the wait, not before: a kernel two launches on is never
    // scheduled before the one it waits for could start.
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Asks L2 for [p, p + bytes) without waiting: thread `index` of `count`
// (a warp's lanes by default) asks for every count-th 128-byte line from
// its own. Weights are read-only during a step, so a kernel may ask for
// its rows before wait_for_inputs(): they are on the way while the kernel
// before it finishes. A decode matvec of a few MB is bound by the latency
// of its first loads, not by bandwidth.
__device__ __forceinline__ void prefetch_l2(const uint8_t* p, size_t bytes, uint64_t index, uint64_t count = 32) {
    const uintptr_t first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t(127);
    const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
    for (uintptr_t a = first + 128 * uintptr_t(index); a < end; a += 128 * uintptr_t(count))
        asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
}

// Whether launches carry the attribute: a device of compute capability 9 or
// later, and DS4_CUDA_PDL not "0". Read once per process.
inline bool pdl_enabled() {
    static const bool on = [] {
        if (!env_switch("DS4_CUDA_PDL", true)) return false;
        int dev = 0, major = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
            return false;
        return major >= 9;
    }();
    return on;
}

template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl_enabled() ? 1 : 0;
    check(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...), "launching a kernel");
}

}  // namespace ds4::cuda

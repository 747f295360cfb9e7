// 16-byte copies from global to shared memory that hold no registers while in
// flight (cp.async, sm_80 and later): a warp can have whole tiles on their
// way at once instead of one register load's worth per memory round trip.
#pragma once

#include <cuda_runtime.h>

namespace ds4::cuda {

// Starts the copy of 16 bytes src (global, 16-byte aligned) -> dst (shared).
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
    const unsigned d = unsigned(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
// Starts the copy of 4 bytes src (global, 4-byte aligned) -> dst (shared),
// through L1 (cp.async.cg takes 16-byte copies only).
__device__ __forceinline__ void cp_async4(void* dst, const void* src) {
    const unsigned d = unsigned(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src) : "memory");
}
// Waits for this thread's copies; a barrier (__syncwarp, __syncthreads) then
// makes every thread's visible to the others.
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
// Closes this thread's copies started since the last commit into one group.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait_group() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

}  // namespace ds4::cuda

// Where a step's row t goes in a KV cache of slots of slot_rows rows: row
// slots[t] * slot_rows + positions[t], or -1 for a row outside its slot or
// the cache's cache_rows (dropped: the session checks positions before a
// step runs). The one rule of kv_store_kernel and of qk_norm_rope_kernel's
// fused store.
#pragma once

#include <cstdint>

namespace ds4::cuda {
namespace {

__device__ __forceinline__ int64_t cache_row(const int32_t* positions, const int32_t* slots, int64_t t,
                                             int64_t slot_rows, int64_t cache_rows) {
    if (positions[t] < 0 || positions[t] >= slot_rows || slots[t] < 0) return -1;
    const int64_t pos = int64_t(slots[t]) * slot_rows + positions[t];
    return pos < cache_rows ? pos : -1;
}

}  // namespace
}  // namespace ds4::cuda

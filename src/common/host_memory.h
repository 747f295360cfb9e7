// How much host memory can still be allocated, for budgets (an in-memory
// synthetic model, the CPU backend's expert cache).
#pragma once

#include <cstdint>

namespace ds4 {

// MemAvailable from /proc/meminfo: what the kernel estimates can be
// allocated without swapping (free memory plus reclaimable page cache);
// 0 when it cannot be read.
uint64_t available_host_memory();

// MemTotal from /proc/meminfo: the machine's RAM (what --simulate-used-memory
// may claim at most); 0 when it cannot be read.
uint64_t total_host_memory();

}  // namespace ds4

// How much host memory can still be allocated, for budgets (an in-memory
// synthetic model, the CPU backend's expert cache).
#pragma once

#include <cstdint>
#include <string>

namespace ds4 {

// MemAvailable from /proc/meminfo: what the kernel estimates can be
// allocated without swapping (free memory plus reclaimable page cache),
// and no more than this process's memory cgroup has room for (a container,
// a systemd scope); 0 when it cannot be read.
uint64_t available_host_memory();

// The room the memory cgroup leaves this process: over its cgroup and every
// ancestor with a limit, the least of limit less usage, the usage counted
// without page cache (which the kernel reclaims); UINT64_MAX when no limit
// applies. `self` is /proc/self/cgroup's text, `root` where the cgroup file
// systems are mounted (/sys/fs/cgroup); cgroup v1's memory controller, else
// v2's unified hierarchy.
uint64_t cgroup_memory_room(const std::string& self, const std::string& root);

// Where available_host_memory() comes from when the memory cgroup, not the
// machine, sets it: "the memory cgroup's room; the machine's MemAvailable is
// X GiB"; "" when MemAvailable binds (or no limit applies). For the startup
// plan, so a budget smaller than the machine suggests says why.
std::string host_memory_limit_note();
// The same from the two figures (room: UINT64_MAX when no limit applies).
std::string cgroup_limit_note(uint64_t mem_available, uint64_t room);

// MemTotal from /proc/meminfo: the machine's RAM (what --simulate-used-memory
// may claim at most); 0 when it cannot be read.
uint64_t total_host_memory();

}  // namespace ds4

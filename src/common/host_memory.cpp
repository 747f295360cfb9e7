#include "common/host_memory.h"

#include <fstream>
#include <string>

namespace ds4 {

namespace {

// One "Key: N kB" line of /proc/meminfo, in bytes; 0 when absent.
uint64_t meminfo_bytes(const std::string& wanted) {
    std::ifstream in("/proc/meminfo");
    std::string key, unit;
    uint64_t kib = 0;
    while (in >> key >> kib >> unit)
        if (key == wanted) return kib * 1024;
    return 0;
}

}  // namespace

uint64_t available_host_memory() { return meminfo_bytes("MemAvailable:"); }

uint64_t total_host_memory() { return meminfo_bytes("MemTotal:"); }

}  // namespace ds4

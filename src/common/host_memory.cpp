#include "common/host_memory.h"

#include <fstream>
#include <string>

namespace ds4 {

uint64_t available_host_memory() {
    std::ifstream in("/proc/meminfo");
    std::string key, unit;
    uint64_t kib = 0;
    while (in >> key >> kib >> unit)
        if (key == "MemAvailable:") return kib * 1024;
    return 0;
}

}  // namespace ds4

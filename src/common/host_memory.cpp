#include "common/host_memory.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>

namespace ds4 {

namespace {

constexpr uint64_t kNoLimit = std::numeric_limits<uint64_t>::max();

// One "Key: N kB" line of /proc/meminfo, in bytes; 0 when absent.
uint64_t meminfo_bytes(const std::string& wanted) {
    std::ifstream in("/proc/meminfo");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string key;
        uint64_t kib = 0;
        if (fields >> key >> kib && key == wanted) return kib * 1024;
    }
    return 0;
}

// The first line of a cgroup file as a number; `absent` when the file is
// not there or holds no number ("max": no limit).
uint64_t read_number(const std::string& path, uint64_t absent) {
    std::ifstream in(path);
    std::string text;
    if (!(in >> text)) return absent;
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    return ec == std::errc() && end == text.data() + text.size() ? v : absent;
}

// A "key value" line of memory.stat; 0 when absent.
uint64_t stat_value(const std::string& path, std::string_view key) {
    std::ifstream in(path);
    std::string k;
    uint64_t v = 0;
    while (in >> k >> v)
        if (k == key) return v;
    return 0;
}

}  // namespace

uint64_t cgroup_memory_room(const std::string& self, const std::string& root) {
    // The memory controller's line: "N:...,memory,...:/path" (cgroup v1)
    // wins over the unified "0::/path" (v2), which holds memory only where
    // v1 does not.
    std::istringstream lines(self);
    std::string line, v1_path, v2_path;
    bool v1 = false, v2 = false;
    while (std::getline(lines, line)) {
        const size_t a = line.find(':');
        if (a == std::string::npos) continue;
        const size_t b = line.find(':', a + 1);
        if (b == std::string::npos) continue;
        const std::string_view controllers = std::string_view(line).substr(a + 1, b - a - 1);
        if (controllers.empty()) {
            v2 = true;
            v2_path = line.substr(b + 1);
            continue;
        }
        // One of the comma-separated names is "memory".
        for (size_t i = 0; i <= controllers.size();) {
            const size_t j = std::min(controllers.find(',', i), controllers.size());
            if (controllers.substr(i, j - i) == "memory") {
                v1 = true;
                v1_path = line.substr(b + 1);
            }
            i = j + 1;
        }
    }
    if (!v1 && !v2) return kNoLimit;
    const std::string base = v1 ? root + "/memory" : root;
    std::string path = v1 ? v1_path : v2_path;
    // v1 writes "no limit" as a huge page-rounded number.
    const uint64_t huge = uint64_t{1} << 62;
    uint64_t room = kNoLimit;
    // This cgroup and every ancestor: the tightest one binds. What a level
    // holds in file pages (page cache) the kernel can reclaim for us.
    for (;;) {
        const std::string dir = base + (path == "/" ? "" : path);
        const uint64_t limit = read_number(dir + (v1 ? "/memory.limit_in_bytes" : "/memory.max"), kNoLimit);
        if (limit < huge) {
            const uint64_t usage = read_number(dir + (v1 ? "/memory.usage_in_bytes" : "/memory.current"), 0);
            const std::string stat = dir + "/memory.stat";
            const uint64_t file = v1 ? stat_value(stat, "total_inactive_file") + stat_value(stat, "total_active_file")
                                     : stat_value(stat, "inactive_file") + stat_value(stat, "active_file");
            const uint64_t held = usage > file ? usage - file : 0;
            room = std::min(room, limit > held ? limit - held : 0);
        }
        if (path.empty() || path == "/") break;
        const size_t slash = path.find_last_of('/');
        path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
    return room;
}

namespace {

uint64_t own_cgroup_room() {
    std::ifstream in("/proc/self/cgroup");
    std::stringstream self;
    self << in.rdbuf();
    return cgroup_memory_room(self.str(), "/sys/fs/cgroup");
}

}  // namespace

uint64_t available_host_memory() {
    const uint64_t avail = meminfo_bytes("MemAvailable:");
    const uint64_t room = own_cgroup_room();
    return room == kNoLimit ? avail : std::min(avail, room);
}

std::string host_memory_limit_note() {
    const uint64_t avail = meminfo_bytes("MemAvailable:");
    const uint64_t room = own_cgroup_room();
    return cgroup_limit_note(avail, room);
}

std::string cgroup_limit_note(uint64_t mem_available, uint64_t room) {
    if (room == kNoLimit || room >= mem_available) return "";
    char note[96];
    std::snprintf(note, sizeof note, "the memory cgroup's room; the machine's MemAvailable is %.2f GiB",
                  double(mem_available) / double(uint64_t{1} << 30));
    return note;
}

uint64_t total_host_memory() { return meminfo_bytes("MemTotal:"); }

}  // namespace ds4

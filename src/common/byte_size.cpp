#include "common/byte_size.h"

#include <cstdint>
#include <cstdio>

namespace ds4 {

namespace {
constexpr double kGiB = double(uint64_t{1} << 30);
constexpr double kMiB = double(uint64_t{1} << 20);
}  // namespace

std::string gib_text(double bytes) {
    char b[48];
    std::snprintf(b, sizeof b, "%.2f GiB", bytes / kGiB);
    return b;
}

std::string size_text(double bytes) {
    if (bytes >= kGiB) return gib_text(bytes);
    char b[48];
    std::snprintf(b, sizeof b, "%.1f MiB", bytes / kMiB);
    return b;
}

}  // namespace ds4

// What the fuzz targets share: a broken promise is a finding like a crash
// (FUZZ_REQUIRE aborts with the condition's text), and the readers that take
// a path get the input as a file (one anonymous memory file per process,
// rewritten for each input, opened by path like a file on disk).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#define FUZZ_REQUIRE(cond)                                                   \
    do {                                                                     \
        if (!(cond)) {                                                       \
            std::fprintf(stderr, "fuzz: broken promise: %s (%s:%d)\n", #cond, \
                         __FILE__, __LINE__);                                \
            std::abort();                                                    \
        }                                                                    \
    } while (0)

namespace ds4::fuzz {

inline std::string as_file(const uint8_t* data, size_t size) {
    static const int fd = [] {
        const int f = ::memfd_create("ds4-fuzz-input", MFD_CLOEXEC);
        if (f < 0) {
            std::perror("fuzz: memfd_create");
            std::abort();
        }
        return f;
    }();
    if (::ftruncate(fd, 0) != 0 || ::ftruncate(fd, static_cast<off_t>(size)) != 0 ||
        (size > 0 && ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))) {
        std::perror("fuzz: writing the memory file");
        std::abort();
    }
    return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace ds4::fuzz

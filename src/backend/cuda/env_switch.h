// A/B switches and knobs of the CUDA backend read from the environment, each
// once per process (a recorded step must not change its kernels mid-run).
#pragma once

#include <cstdlib>
#include <cstring>

namespace ds4::cuda {

// NAME=0 turns it off, any other value on; unset: `otherwise`. Call it from
// a function-local static so that it is read once.
inline bool env_switch(const char* name, bool otherwise) {
    const char* v = std::getenv(name);
    if (!v || !*v) return otherwise;
    return std::strcmp(v, "0") != 0;
}

// NAME as a whole number; unset, empty or not a number: `otherwise`. The
// caller checks the range (each knob takes its own few values).
inline long long env_int(const char* name, long long otherwise) {
    const char* v = std::getenv(name);
    if (!v || !*v) return otherwise;
    char* end = nullptr;
    const long long n = std::strtoll(v, &end, 10);
    return end && *end == 0 ? n : otherwise;
}

}  // namespace ds4::cuda

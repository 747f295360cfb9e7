// A/B switches of the CUDA backend read from the environment, each once per
// process (a recorded step must not change its kernels mid-run).
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

}  // namespace ds4::cuda

// Milliseconds of wall time since a steady-clock instant: what telemetry and
// timing lines report.
#pragma once

#include <chrono>

namespace ds4 {

inline double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace ds4

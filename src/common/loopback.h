// Whether a host names this machine's loopback interface (127.0.0.0/8, ::1,
// localhost): the one place a pipeline runs without a cluster key.
#pragma once

#include <string>

namespace ds4 {

inline bool is_loopback_host(const std::string& host) {
    return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

}  // namespace ds4

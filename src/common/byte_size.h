// Sizes of memory and files as people read them in log lines and messages.
#pragma once

#include <string>

namespace ds4 {

// "12.34 GiB".
std::string gib_text(double bytes);
// "1.25 GiB", or "3.0 MiB" below a GiB (small caches of tiny models still
// read as sizes).
std::string size_text(double bytes);

}  // namespace ds4

// Splits the filling of one chunk of tensor bytes across threads.
//
// The synthetic generators are counter-based (any byte range can be made on
// its own), so a chunk can be cut anywhere on a block boundary and the bytes
// do not depend on the number of threads.
#pragma once

#include <cstddef>
#include <functional>

namespace ds4 {

// Calls fill(begin, end) for parts of [0, n) that start on multiples of
// `unit`, on up to 16 threads when n is large enough to be worth it (a few
// MiB per thread), else once on the calling thread. Rethrows the first
// exception a part threw.
void parallel_fill(size_t n, size_t unit, const std::function<void(size_t begin, size_t end)>& fill);

}  // namespace ds4

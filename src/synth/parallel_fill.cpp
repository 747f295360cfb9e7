#include "synth/parallel_fill.h"

#include <algorithm>
#include <exception>
#include <thread>
#include <vector>

namespace ds4 {

void parallel_fill(size_t n, size_t unit, const std::function<void(size_t, size_t)>& fill) {
    // The writer hands out 16 MiB chunks; below ~2 MiB per thread the cost
    // of starting threads is no longer small against the work.
    constexpr size_t kMinPerThread = size_t{2} << 20;
    unit = std::max<size_t>(1, unit);
    size_t threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), 16);
    threads = std::min(threads, n / kMinPerThread);
    if (threads <= 1) {
        if (n > 0) fill(0, n);
        return;
    }
    const size_t per = (n / threads + unit - 1) / unit * unit;
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> errors(threads);
    for (size_t t = 0; t < threads; ++t) {
        const size_t begin = std::min(n, t * per);
        const size_t end = t + 1 == threads ? n : std::min(n, (t + 1) * per);
        if (begin >= end) break;
        pool.emplace_back([&, t, begin, end] {
            try {
                fill(begin, end);
            } catch (...) {
                errors[t] = std::current_exception();
            }
        });
    }
    for (auto& th : pool) th.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

}  // namespace ds4

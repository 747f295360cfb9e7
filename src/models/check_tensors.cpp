#include "models/check_tensors.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "common/error.h"
#include "quant/quant.h"

namespace ds4 {

namespace {

// All exponent bits set: an infinity or a NaN.
bool finite(float x) { return (std::bit_cast<uint32_t>(x) & 0x7f800000u) != 0x7f800000u; }

bool row_finite(const float* v, int64_t n) {
    bool ok = true;
    for (int64_t i = 0; i < n; ++i) ok &= finite(v[i]);  // no early exit: the loop vectorizes
    return ok;
}

// The sentence for the first bad value of row `row`.
[[noreturn]] void report(const GgufFile& file, const GgufTensorInfo& t, const uint8_t* data, int64_t row) {
    std::vector<float> v(static_cast<size_t>(t.ne[0]));
    dequantize_row(t.type, data + static_cast<size_t>(row) * t.row_bytes(), v.data(), t.ne[0]);
    const int64_t col = std::find_if(v.begin(), v.end(), [](float x) { return !finite(x); }) - v.begin();
    const float x = v[static_cast<size_t>(col)];
    std::string where = "row " + std::to_string(row);
    if (t.ne[2] > 1 || t.ne[3] > 1)  // experts: which matrix, which of its rows
        where += " (matrix " + std::to_string(row / t.ne[1]) + ", its row " + std::to_string(row % t.ne[1]) + ")";
    throw Error(file.path() + ": tensor '" + t.name + "' holds " +
                (std::isnan(x) ? std::string("NaN") : x > 0 ? std::string("+inf") : std::string("-inf")) + " in " +
                where + ", column " + std::to_string(col) + " (found by --check-tensors).");
}

}  // namespace

TensorCheckStats check_tensor_values(const GgufFile& file, ModelMap& map, const MapSelection& sel, int n_threads) {
    ThreadPool pool(std::max(1, n_threads));
    TensorCheckStats stats;
    for (const GgufTensorInfo& t : file.tensors()) {
        if (t.nbytes == 0 || !sel.selects(t.name) || !ggml_type_traits(t.type).computable) continue;
        const uint8_t* data = map.tensor_data(t);
        const int64_t rows = t.n_rows(), n = t.ne[0];
        const size_t row_bytes = t.row_bytes();
        // The lowest bad row so far; rows above it need no reading.
        std::atomic<int64_t> first_bad{rows};
        const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>((size_t{1} << 20) / std::max<size_t>(1, row_bytes)));
        pool.parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
            std::vector<float> v(static_cast<size_t>(n));
            for (int64_t r = begin; r < end && r < first_bad.load(std::memory_order_relaxed); ++r) {
                dequantize_row(t.type, data + static_cast<size_t>(r) * row_bytes, v.data(), n);
                if (row_finite(v.data(), n)) continue;
                int64_t seen = first_bad.load();
                while (r < seen && !first_bad.compare_exchange_weak(seen, r)) {
                }
                break;
            }
        });
        if (first_bad.load() < rows) report(file, t, data, first_bad.load());
        ++stats.tensors;
        stats.bytes += t.nbytes;
    }
    return stats;
}

}  // namespace ds4

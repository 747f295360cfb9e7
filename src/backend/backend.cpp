#include "backend/backend.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"

namespace ds4 {

void Backend::throw_missing_pack(const char* family) const {
    throw Error("the " + name() + " backend cannot run " + family + " models (it has no " + family + " op pack).");
}

std::unique_ptr<ExpertWindows> Backend::expert_windows(int64_t n, uint64_t bytes, int64_t device_slots) {
    if (n < 1 || device_slots < 0 || device_slots > n)
        throw Error("expert windows: " + std::to_string(n) + " windows with " + std::to_string(device_slots) +
                    " slots cannot be made.");
    return make_expert_windows(n, bytes, device_slots);
}

void Backend::count_experts(const Routing& routing, IntArray& counts) {
    const int64_t pairs = routing.rows * routing.n_used;
    std::vector<int32_t> chosen(static_cast<size_t>(pairs)), n(static_cast<size_t>(counts.n));
    download_ints(routing.experts, chosen.data());
    download_ints(counts, n.data());
    for (const int32_t e : chosen)
        if (e >= 0 && e < counts.n) ++n[static_cast<size_t>(e)];
    upload_ints(counts, n.data());
}

void Backend::check_top_k_shapes(const Tensor& x, int k, const Tensor& values, const IntArray& ids,
                                 const IntArray& first_bad) {
    const int64_t most = std::min<int64_t>(x.cols, kMaxTopK);
    if (k < 1 || k > most)
        throw Error("top_k_rows: " + std::to_string(k) + " best of rows of " + std::to_string(x.cols) +
                    " values; 1 to " + std::to_string(most) + " can be taken.");
    if (values.rows != x.rows || values.cols != k || ids.n < x.rows * k || first_bad.n < x.rows)
        throw Error("top_k_rows: the outputs do not hold " + std::to_string(x.rows) + " rows of " +
                    std::to_string(k) + " candidates.");
}

}  // namespace ds4

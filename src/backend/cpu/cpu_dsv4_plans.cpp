// DeepSeek V4's index plans on the CPU: the reference for the CUDA kernels
// that make the same lists on the device (dsv4_plans.cu). Each row's lists
// depend only on its own position, slot and run.
#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"

namespace ds4 {

Dsv4Rows CpuBackend::plan_rows(const CacheRows& batch, int64_t n) {
    if (batch.positions.n < n || batch.slots.n < n)
        throw Error("DeepSeek V4: " + std::to_string(n) + " batch rows but " + std::to_string(batch.positions.n) +
                    " positions.");
    Dsv4Rows r = new_rows_plan(*this, batch, n);
    const int32_t* pos = batch.positions.data;
    const int32_t* slot = batch.slots.data;
    auto continues = [&](int64_t t) { return t > 0 && slot[t - 1] == slot[t] && pos[t - 1] + 1 == pos[t]; };
    for (int64_t t = 0; t < n; ++t) r.run_first.data[t] = continues(t) ? r.run_first.data[t - 1] : pos[t];
    for (int64_t t = n - 1; t >= 0; --t)
        r.run_last.data[t] = t + 1 < n && continues(t + 1) ? r.run_last.data[t + 1] : pos[t];
    return r;
}

IntArray CpuBackend::plan_ring(const Dsv4Rows& rows, int64_t ring) {
    IntArray dst = alloc_ints(rows.n);
    for (int64_t t = 0; t < rows.n; ++t) {
        const int64_t p = rows.positions.data[t];
        dst.data[t] = p > rows.run_last.data[t] - ring ? static_cast<int32_t>(rows.slots.data[t] * ring + p % ring) : -1;
    }
    return dst;
}

Dsv4CompressorPlan CpuBackend::plan_compressor(const Dsv4Rows& rows, int ratio, bool overlap, int64_t cache_rows) {
    const int64_t n = rows.n;
    Dsv4CompressorPlan c = new_compressor_plan(*this, n, ratio, overlap, cache_rows);
    const int per = c.per_block();
    c.ring_dst = plan_ring(rows, c.ring);
    for (int64_t t = 0; t < n; ++t) {
        const int64_t p = rows.positions.data[t], s = rows.slots.data[t], first = rows.run_first.data[t];
        c.in_block.data[t] = static_cast<int32_t>(p % ratio);
        c.visible.count.data[t] = static_cast<int32_t>(std::min<int64_t>((p + 1) / ratio, cache_rows));
        c.visible.base.data[t] = static_cast<int32_t>(s * cache_rows);
        int32_t* src = c.sources.data + t * per;
        const bool ends = (p + 1) % ratio == 0;
        c.cache_dst.data[t] = ends ? static_cast<int32_t>(s * cache_rows + p / ratio) : -1;
        c.block_pos.data[t] = ends ? static_cast<int32_t>(p + 1 - ratio) : 0;
        // Positions of this run come from the batch rows (row t holds
        // position p), earlier ones from the slot's ring.
        auto source = [&](int64_t q) -> int32_t {
            if (!ends || q < 0) return -1;
            if (q >= first) return static_cast<int32_t>(t - (p - q));
            return static_cast<int32_t>(n + s * c.ring + q % c.ring);
        };
        const int64_t start = p + 1 - ratio;
        int j = 0;
        if (overlap)
            for (int i = 0; i < ratio; ++i) src[j++] = source(start - ratio + i);
        for (int i = 0; i < ratio; ++i) src[j++] = source(start + i);
    }
    return c;
}

}  // namespace ds4

// DeepSeek V4's index plans on the device: which rows each compressor pools
// and keeps, and which rows each query sees, made from the batch's
// positions and slots so that no host decision sits inside a step (a
// decode step is then recorded once and replayed). One thread per batch
// row; the lists are CpuBackend's (cpu_dsv4_plans.cpp), row for row.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops_deepseek4.h"

namespace ds4::cuda {
namespace {

constexpr int kThreads = 128;

// Row t continues row t - 1's run: same slot, next position.
__device__ bool continues(const int32_t* pos, const int32_t* slot, int64_t t) {
    return t > 0 && slot[t - 1] == slot[t] && pos[t - 1] + 1 == pos[t];
}

// A run is at most one sequence's rows of the batch; each thread walks to
// its run's ends (batches are a few thousand rows at most).
__global__ void plan_rows_kernel(const int32_t* pos, const int32_t* slot, int64_t n, int32_t* run_first,
                                 int32_t* run_last) {
    wait_for_inputs();
    const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= n) return;
    int64_t a = t, b = t;
    while (continues(pos, slot, a)) --a;
    while (b + 1 < n && continues(pos, slot, b + 1)) ++b;
    run_first[t] = pos[a];
    run_last[t] = pos[b];
}

__global__ void plan_ring_kernel(const int32_t* pos, const int32_t* slot, const int32_t* run_last, int64_t n,
                                 int64_t ring, int32_t* dst) {
    wait_for_inputs();
    const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const int64_t p = pos[t];
    dst[t] = p > run_last[t] - ring ? int32_t(slot[t] * ring + p % ring) : -1;
}

__global__ void plan_compressor_kernel(CompressorPlanArgs a) {
    wait_for_inputs();
    const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= a.n) return;
    const int64_t p = a.positions[t], s = a.slots[t], first = a.run_first[t], r = a.ratio;
    a.in_block[t] = int32_t(p % r);
    const int64_t visible = (p + 1) / r;
    a.visible_count[t] = int32_t(visible < a.cache_rows ? visible : a.cache_rows);
    a.visible_base[t] = int32_t(s * a.cache_rows);
    const bool ends = (p + 1) % r == 0;
    a.cache_dst[t] = ends ? int32_t(s * a.cache_rows + p / r) : -1;
    a.block_pos[t] = ends ? int32_t(p + 1 - r) : 0;
    const int per = a.overlap ? 2 * a.ratio : a.ratio;
    int32_t* src = a.sources + t * per;
    const int64_t start = a.overlap ? p + 1 - 2 * r : p + 1 - r;
    for (int j = 0; j < per; ++j) {
        const int64_t q = start + j;
        int32_t id = -1;
        if (ends && q >= 0) id = q >= first ? int32_t(t - (p - q)) : int32_t(a.n + s * a.ring + q % a.ring);
        src[j] = id;
    }
}

}  // namespace

void plan_rows(const int32_t* positions, const int32_t* slots, int64_t n, int32_t* run_first, int32_t* run_last,
               cudaStream_t stream) {
    if (n <= 0) return;
    launch(plan_rows_kernel, blocks_for(n, kThreads), kThreads, 0, stream, positions, slots, n, run_first, run_last);
    check_launch("plan_rows_kernel");
}

void plan_ring(const int32_t* positions, const int32_t* slots, const int32_t* run_last, int64_t n, int64_t ring,
               int32_t* dst, cudaStream_t stream) {
    if (n <= 0) return;
    launch(plan_ring_kernel, blocks_for(n, kThreads), kThreads, 0, stream, positions, slots, run_last, n, ring, dst);
    check_launch("plan_ring_kernel");
}

void plan_compressor(const CompressorPlanArgs& a, cudaStream_t stream) {
    if (a.n <= 0) return;
    launch(plan_compressor_kernel, blocks_for(a.n, kThreads), kThreads, 0, stream, a);
    check_launch("plan_compressor_kernel");
}

}  // namespace ds4::cuda

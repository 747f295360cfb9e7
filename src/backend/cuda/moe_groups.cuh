// Grouping a decode batch's (token, slot) pairs by expert on the device, for
// the grouped MoE kernels (moe_grouped.cu on float activations,
// moe_grouped_q8.cu on int8 ones): block column g serves one expert and
// every pair routed to it, found from the routing in device memory, so a
// step that uses them can be recorded as a CUDA graph.
#pragma once

#include <cstdint>
#include <type_traits>

namespace ds4::cuda {
namespace {

constexpr int kGroupMaxExperts = 32 * 32;   // one bit each in a warp's 32 words
constexpr int kGroupMaxPairs = 512;         // cuda_moe.cpp's kMaxDevicePairs

// Which expert block column g serves, and its pairs, listed in pair order by
// warp 0. With at least as many pairs as experts there is a column per
// expert (column g is expert g); with fewer, a column per pair at most, and
// warp 0 first marks every chosen expert in a bit set and takes the g-th.
// Returns the number of pairs (0: nobody chose the expert, or fewer than
// g + 1 experts were chosen); every thread of the block gets it.
__device__ int expert_group(const int32_t* __restrict__ experts, int n_pairs, int n_exp, int g, int* list,
                            int& expert) {
    __shared__ unsigned used[kGroupMaxExperts / 32];
    __shared__ int s_count, s_expert;
    const int tid = int(threadIdx.x), lane = tid & 31;
    if (n_exp <= n_pairs) {
        // A column per expert: column g is expert g, no bit set needed.
        if (tid < 32) {
            int n = 0;
            for (int base = 0; base < n_pairs; base += 32) {
                const bool mine = base + lane < n_pairs && experts[base + lane] == g;
                const unsigned m = __ballot_sync(0xffffffffu, mine);
                if (mine) list[n + __popc(m & ((1u << lane) - 1u))] = base + lane;
                n += __popc(m);
            }
            if (lane == 0) s_count = n;
        }
        __syncthreads();
        expert = g;
        return s_count;
    }
    if (tid < kGroupMaxExperts / 32) used[tid] = 0u;
    __syncthreads();
    for (int p = tid; p < n_pairs; p += int(blockDim.x)) {
        const int e = experts[p];
        if (e >= 0 && e < kGroupMaxExperts) atomicOr(&used[e >> 5], 1u << (e & 31));
    }
    __syncthreads();
    if (tid < 32) {
        // Lane i holds word i; an exclusive prefix count of set bits finds the word with bit g.
        const unsigned w = used[lane];
        const int c = __popc(w);
        int incl = c;
        for (int off = 1; off < 32; off <<= 1) {
            const int o = __shfl_up_sync(0xffffffffu, incl, off);
            if (lane >= off) incl += o;
        }
        const int excl = incl - c;
        const bool here = g >= excl && g < incl;
        const unsigned who = __ballot_sync(0xffffffffu, here);
        int e = -1;
        if (who) {
            const int src = __ffs(who) - 1;
            const int bit = here ? int(__fns(w, 0, g - excl + 1)) : 0;
            e = __shfl_sync(0xffffffffu, 32 * lane + bit, src);
        }
        int n = 0;
        if (e >= 0)
            for (int base = 0; base < n_pairs; base += 32) {
                const bool mine = base + lane < n_pairs && experts[base + lane] == e;
                const unsigned m = __ballot_sync(0xffffffffu, mine);
                if (mine) list[n + __popc(m & ((1u << lane) - 1u))] = base + lane;
                n += __popc(m);
            }
        if (lane == 0) {
            s_count = n;
            s_expert = e;
        }
    }
    __syncthreads();
    expert = s_expert;
    return s_count;
}

// f(NA, a0) over pairs [0, n) in tiles of 4, then 2, then 1 pair.
template <class F>
__device__ __forceinline__ void pair_tiles(int n, F&& f) {
    int a = 0;
    for (; a + 4 <= n; a += 4) f(std::integral_constant<int, 4>{}, a);
    if (a + 2 <= n) {
        f(std::integral_constant<int, 2>{}, a);
        a += 2;
    }
    if (a < n) f(std::integral_constant<int, 1>{}, a);
}

// pair_tiles with tiles of at most 2 (kernels whose activations take twice
// the registers).
template <class F>
__device__ __forceinline__ void pair_tiles2(int n, F&& f) {
    int a = 0;
    for (; a + 2 <= n; a += 2) f(std::integral_constant<int, 2>{}, a);
    if (a < n) f(std::integral_constant<int, 1>{}, a);
}

// Block columns: one per expert that may be chosen (no more than the pairs).
inline unsigned group_columns(int64_t n_pairs, int64_t n_exp) { return unsigned(n_pairs < n_exp ? n_pairs : n_exp); }

inline bool groups_fit(int64_t n_exp, int64_t n_pairs) {
    return n_exp >= 1 && n_exp <= kGroupMaxExperts && n_pairs >= 1 && n_pairs <= kGroupMaxPairs;
}

}  // namespace
}  // namespace ds4::cuda

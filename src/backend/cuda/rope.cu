// RoPE of whole heads (qwen3moe) or of their tail (DeepSeek V4) and its
// inverse, with the CPU backend's arithmetic (cpu_rope.cpp): the angles are
// built by the same repeated multiplication and every product and sum is
// rounded on its own (no fused multiply-add), so only cosf/sinf's last bit
// can differ from the CPU.
#include <algorithm>
#include <climits>
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cache_row.cuh"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"

namespace ds4::cuda {
namespace {

struct RopePartialArgs {
    int n_rot, head_dim, offset, n_heads;
    int64_t cols;
    float freq_scale, ext_factor, mscale, theta_scale, corr0, corr1, sin_sign;
    bool neox;
};

// cos and sin (times mscale, sin with sin_sign) of rotated pair `pair` at
// position pos.
__device__ __forceinline__ float2 pair_cos_sin(int32_t pos, int pair, const RopePartialArgs& a) {
    float theta_extrap = float(pos);
    for (int s = 0; s < pair; ++s) theta_extrap = __fmul_rn(theta_extrap, a.theta_scale);
    const float theta_interp = __fmul_rn(a.freq_scale, theta_extrap);
    float theta = theta_interp;
    if (a.ext_factor != 0.0f) {
        const float yv = __fdiv_rn(__fsub_rn(float(pair), a.corr0), fmaxf(0.001f, __fsub_rn(a.corr1, a.corr0)));
        const float ramp = __fmul_rn(__fsub_rn(1.0f, fminf(1.0f, fmaxf(0.0f, yv))), a.ext_factor);
        theta = __fadd_rn(__fmul_rn(theta_interp, __fsub_rn(1.0f, ramp)), __fmul_rn(theta_extrap, ramp));
    }
    return make_float2(__fmul_rn(cosf(theta), a.mscale), __fmul_rn(__fmul_rn(sinf(theta), a.mscale), a.sin_sign));
}

// One block per row: cos/sin per rotated pair into shared memory, then all heads.
__global__ void rope_partial_kernel(float* x, const int32_t* positions, RopePartialArgs a) {
    wait_for_inputs();
    extern __shared__ float cs[];  // n_rot values: cos, sin per pair
    const int64_t t = blockIdx.x;
    const int half = a.n_rot / 2;
    for (int pair = threadIdx.x; pair < half; pair += blockDim.x) {
        const float2 c = pair_cos_sin(positions[t], pair, a);
        cs[2 * pair] = c.x;
        cs[2 * pair + 1] = c.y;
    }
    __syncthreads();
    for (int job = threadIdx.x; job < a.n_heads * half; job += blockDim.x) {
        const int h = job / half, pair = job % half, i0 = 2 * pair;
        float* v = x + t * a.cols + int64_t(h) * a.head_dim + a.offset;
        const int ia = a.neox ? pair : i0;
        const int ic = a.neox ? pair + half : i0 + 1;
        const float x0 = v[ia], x1 = v[ic];
        v[ia] = __fsub_rn(__fmul_rn(x0, cs[i0]), __fmul_rn(x1, cs[i0 + 1]));
        v[ic] = __fadd_rn(__fmul_rn(x0, cs[i0 + 1]), __fmul_rn(x1, cs[i0]));
    }
}

// Where qk_norm_rope_kernel also stores the rotated k rows and the v rows
// (at cache_row, kv_store_kernel's rule). kc null: nothing is stored and no
// v blocks run.
struct KvStoreArgs {
    const float* v;
    int64_t k_cols, v_cols, slot_rows, cache_rows;
    const int32_t* slots;
    float* kc;
    float* vc;
    int n_v_blocks;  // blocks per row copying v
};

// qwen3moe's attention input in one launch: per-head RMS norm (rms_norm_kernel's
// arithmetic: squares summed in double, x * inv * w) then whole-head RoPE, for
// the q heads and then the k heads of every row. One block per (row, head),
// one thread per rotated pair holding the pair's two values throughout. With
// a cache (st.kc), the k heads' blocks also write their rotated values into
// the key cache and st.n_v_blocks more blocks a row copy v into the value
// cache: the step's kv_store launch (3 us a Qwen3 layer) folded in, the same
// values in the same places.
__global__ void qk_norm_rope_kernel(float* q, float* k, int n_head_q, int n_head_k, const float* qw,
                                    const float* kw, float eps, const int32_t* positions, RopePartialArgs a,
                                    KvStoreArgs st) {
    wait_for_inputs();
    const int per_row = n_head_q + n_head_k + (st.kc ? st.n_v_blocks : 0);
    const int64_t t = blockIdx.x / per_row;
    const int hh = int(blockIdx.x % per_row);
    if (hh >= n_head_q + n_head_k) {  // a share of row t of v into the value cache
        const int64_t pos = cache_row(positions, st.slots, t, st.slot_rows, st.cache_rows);
        if (pos < 0) return;
        const int64_t chunk = (st.v_cols + st.n_v_blocks - 1) / st.n_v_blocks;
        const int64_t c0 = int64_t(hh - n_head_q - n_head_k) * chunk;
        const int64_t c1 = c0 + chunk < st.v_cols ? c0 + chunk : st.v_cols;
        for (int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x) st.vc[pos * st.v_cols + c] = st.v[t * st.v_cols + c];
        return;
    }
    const bool is_q = hh < n_head_q;
    float* v = is_q ? q + (t * n_head_q + hh) * a.head_dim : k + (t * n_head_k + (hh - n_head_q)) * a.head_dim;
    const float* w = is_q ? qw : kw;
    const int half = a.head_dim / 2, pair = threadIdx.x;
    const int ia = a.neox ? pair : 2 * pair, ic = a.neox ? pair + half : 2 * pair + 1;
    float x0 = 0.0f, x1 = 0.0f;
    double ss = 0.0;
    if (pair < half) {
        x0 = v[ia];
        x1 = v[ic];
        ss = double(x0) * x0 + double(x1) * x1;
    }
    __shared__ double partial[32];
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
    __syncthreads();
    double total = 0.0;
    for (int i = 0; i < int(blockDim.x >> 5); ++i) total += partial[i];
    if (pair >= half) return;
    const float inv = 1.0f / sqrtf(float(total / double(a.head_dim)) + eps);
    x0 = x0 * inv * (w ? w[ia] : 1.0f);
    x1 = x1 * inv * (w ? w[ic] : 1.0f);
    const float2 c = pair_cos_sin(positions[t], pair, a);
    const float r0 = __fsub_rn(__fmul_rn(x0, c.x), __fmul_rn(x1, c.y));
    const float r1 = __fadd_rn(__fmul_rn(x0, c.y), __fmul_rn(x1, c.x));
    v[ia] = r0;
    v[ic] = r1;
    if (is_q || !st.kc) return;
    const int64_t pos = cache_row(positions, st.slots, t, st.slot_rows, st.cache_rows);
    if (pos < 0) return;
    float* dst = st.kc + pos * st.k_cols + int64_t(hh - n_head_q) * a.head_dim;
    dst[ia] = r0;
    dst[ic] = r1;
}

// YaRN correction range, as in the CPU backend (ggml_rope_yarn_corr_dims).
float corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * std::log(n_ctx_orig / (n_rot * 2.0f * static_cast<float>(M_PI))) / (2.0f * std::log(base));
}

}  // namespace

namespace {

RopePartialArgs rope_args(const RopeParams& p, int head_dim, int offset, int64_t cols, bool inverse) {
    RopePartialArgs a{};
    a.n_rot = p.n_rot;
    a.head_dim = head_dim;
    a.offset = offset;
    a.n_heads = int(cols / head_dim);
    a.cols = cols;
    a.freq_scale = p.freq_scale;
    a.ext_factor = p.ext_factor;
    // The CPU multiplies attn_factor by the YaRN magnitude per pair; it does
    // not depend on the pair, so the host computes it once, with the CPU's
    // std::log and rounding.
    a.mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) a.mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    a.theta_scale = std::pow(p.freq_base, -2.0f / p.n_rot);
    a.sin_sign = inverse ? -1.0f : 1.0f;
    a.neox = p.neox;
    const float lo = std::floor(corr_dim(p.n_rot, p.n_ctx_orig, p.beta_fast, p.freq_base));
    const float hi = std::ceil(corr_dim(p.n_rot, p.n_ctx_orig, p.beta_slow, p.freq_base));
    a.corr0 = std::max(0.0f, lo);
    a.corr1 = std::min(static_cast<float>(p.n_rot - 1), hi);
    return a;
}

}  // namespace

void rope_partial(float* x, int64_t rows, int64_t cols, int head_dim, int offset, const int32_t* positions,
                  const RopeParams& p, bool inverse, cudaStream_t stream) {
    if (rows <= 0 || p.n_rot == 0) return;
    const RopePartialArgs a = rope_args(p, head_dim, offset, cols, inverse);
    // rows is a grid dimension x (up to 2^31 - 1): one block per token, a
    // thread per rotated pair of every head up to 1024 (128 threads walked
    // GLM-5's 64 x 32 pairs 16 times, a load-store round trip each: 4 us a
    // decode call, ncu, H200, 2026-12-04). Each value's arithmetic is the same.
    const int64_t pairs = int64_t(a.n_heads) * (p.n_rot / 2);
    const int threads = int(std::clamp<int64_t>((pairs + 31) / 32 * 32, 64, 1024));
    launch(rope_partial_kernel, unsigned(rows), threads, sizeof(float) * size_t(std::max(2, p.n_rot)), stream, x, positions, a);
    check_launch("rope_partial_kernel");
}

bool qk_norm_rope_supported(int head_dim, const RopeParams& p) {
    return p.n_rot == head_dim && head_dim % 2 == 0 && head_dim / 2 <= 1024;
}

namespace {
void launch_qk_norm_rope(float* q, float* k, int64_t n_tok, int n_head_q, int n_head_k, int head_dim,
                         const float* q_norm, const float* k_norm, float eps, const int32_t* positions,
                         const RopeParams& p, const KvStoreArgs& st, cudaStream_t stream) {
    if (n_tok <= 0) return;
    const int64_t per_row = int64_t(n_head_q) + n_head_k + (st.kc ? st.n_v_blocks : 0);
    if (n_tok * per_row > INT32_MAX) throw Error("CUDA qk_norm_rope: too many rows.");
    const RopePartialArgs a = rope_args(p, head_dim, 0, int64_t(n_head_q) * head_dim, false);
    const int threads = (head_dim / 2 + 31) / 32 * 32;
    launch(qk_norm_rope_kernel, unsigned(n_tok * per_row), threads, 0, stream, q, k, n_head_q, n_head_k, q_norm, k_norm,
           eps, positions, a, st);
    check_launch("qk_norm_rope_kernel");
}
}  // namespace

void qk_norm_rope(float* q, float* k, int64_t n_tok, int n_head_q, int n_head_k, int head_dim, const float* q_norm,
                  const float* k_norm, float eps, const int32_t* positions, const RopeParams& p, cudaStream_t stream) {
    launch_qk_norm_rope(q, k, n_tok, n_head_q, n_head_k, head_dim, q_norm, k_norm, eps, positions, p, KvStoreArgs{},
                        stream);
}

void qk_norm_rope_store(float* q, float* k, const float* v, int64_t n_tok, int n_head_q, int n_head_k, int head_dim,
                        int64_t v_cols, const float* q_norm, const float* k_norm, float eps, const int32_t* positions,
                        const int32_t* slots, int64_t slot_rows, int64_t cache_rows, float* k_cache, float* v_cache,
                        const RopeParams& p, cudaStream_t stream) {
    KvStoreArgs st{};
    st.v = v;
    st.k_cols = int64_t(n_head_k) * head_dim;
    st.v_cols = v_cols;
    st.slot_rows = slot_rows;
    st.cache_rows = cache_rows;
    st.slots = slots;
    st.kc = k_cache;
    st.vc = v_cache;
    st.n_v_blocks = std::max(1, n_head_k);  // a kv head's share of v each
    launch_qk_norm_rope(q, k, n_tok, n_head_q, n_head_k, head_dim, q_norm, k_norm, eps, positions, p, st, stream);
}

}  // namespace ds4::cuda

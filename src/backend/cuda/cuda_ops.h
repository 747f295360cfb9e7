// Kernel launchers of the CUDA backend, one group per .cu file. Pointers are
// device pointers unless named host_*; everything runs on `stream`, in order.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/backend.h"
#include "gguf/ggml_type.h"

namespace ds4::cuda {

// ---- quant_matmul.cu: everything that decodes ggml blocks ------------------
// Copies the codebooks (IQ2_XXS grid) into the current device; once per device.
void init_quant_tables();
bool quant_type_supported(GgmlType type);
// The most tokens matvec takes; more go through dequantize + cuBLAS.
constexpr int64_t kMatvecMaxTokens = 8;
// dst[r][0..k) = decoded row r of `w` (row r at w + r * row_bytes), r < n_rows;
// with `ids`, row r is table row ids[r] instead.
void dequantize_rows(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t k, int64_t n_rows,
                     const int32_t* ids, float* dst, int64_t ld_dst, cudaStream_t stream);
// y[t][r] = sum_i W[r][i] x[t][i] for t < n_tok (<= kMatvecMaxTokens), decoding W on the fly.
void matvec(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t k, int64_t n_rows, const float* x,
            int64_t ld_x, int64_t n_tok, float* y, int64_t ld_y, cudaStream_t stream);

// ---- norm_rope.cu -----------------------------------------------------------
// n_groups groups of `group` contiguous values; weight (length group) optional.
void rms_norm(const float* x, const float* weight, float eps, int64_t n_groups, int64_t group, float* y,
              cudaStream_t stream);
void rope(float* x, int64_t rows, int64_t cols, int head_dim, const int32_t* positions, const RopeParams& p,
          cudaStream_t stream);

// ---- attention.cu -------------------------------------------------------------
// Causal GQA attention: query row t (position pos0 + t) against cache rows
// [0, pos0 + t]. Rows are contiguous: q [T x n_head*dk], caches [ctx x n_kv*d].
void attention(const float* q, int64_t n_tok, const float* k_cache, int64_t ld_k, const float* v_cache,
               int64_t ld_v, int64_t pos0, const AttentionParams& p, float* out, cudaStream_t stream);

// ---- elementwise.cu -----------------------------------------------------------
void add(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
void scale(float* x, float s, int64_t n, cudaStream_t stream);
// x[t][i] *= w[n_w == 1 ? 0 : i]
void mul_row(float* x, int64_t rows, int64_t cols, const float* w, int64_t n_w, cudaStream_t stream);
void add_row(float* x, int64_t rows, int64_t cols, const float* b, cudaStream_t stream);
void swiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream);
// dst[i] = src[rows[i]] (rows of `cols` floats), i < n.
void gather_rows(const float* src, int64_t cols, const int32_t* rows, int64_t n, float* dst, cudaStream_t stream);
// dst[rows[i]] += (weights[i] * s) * src[i], i < n; rows distinct within a call.
void scatter_add_rows(const float* src, int64_t cols, const int32_t* rows, const float* weights, float s, int64_t n,
                      float* dst, cudaStream_t stream);

}  // namespace ds4::cuda

// Internal interface between quant/dispatch.cpp and the per-format kernels.
// A kernel gets n already checked: a whole number of blocks of its type, and
// non-negative. Kernels never throw; validation lives in dispatch.cpp.
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"

namespace ds4::quant_kernels {

using DequantizeFn = void (*)(const void* x, float* y, int64_t n);
using DotFn = float (*)(const void* w, const float* x, int64_t n);

struct RowKernels {
    DequantizeFn dequantize = nullptr;
    DotFn dot = nullptr;
};

// The scalar reference kernels of a type; both null when ds4 has none.
RowKernels scalar_kernels(GgmlType type);
// The AVX2+FMA+F16C kernels; call only when the CPU has those (avx2_usable()).
RowKernels avx2_kernels(GgmlType type);
bool avx2_usable();

// Scalar reference kernels (scalar_*.cpp). Dot products accumulate in double.
void dequantize_f32_scalar(const void* x, float* y, int64_t n);
float dot_f32_scalar(const void* w, const float* x, int64_t n);
void dequantize_f16_scalar(const void* x, float* y, int64_t n);
float dot_f16_scalar(const void* w, const float* x, int64_t n);
void dequantize_bf16_scalar(const void* x, float* y, int64_t n);
float dot_bf16_scalar(const void* w, const float* x, int64_t n);
void dequantize_q8_0_scalar(const void* x, float* y, int64_t n);
float dot_q8_0_scalar(const void* w, const float* x, int64_t n);
void dequantize_q2_k_scalar(const void* x, float* y, int64_t n);
float dot_q2_k_scalar(const void* w, const float* x, int64_t n);
void dequantize_q4_k_scalar(const void* x, float* y, int64_t n);
float dot_q4_k_scalar(const void* w, const float* x, int64_t n);
void dequantize_q5_k_scalar(const void* x, float* y, int64_t n);
float dot_q5_k_scalar(const void* w, const float* x, int64_t n);
void dequantize_q6_k_scalar(const void* x, float* y, int64_t n);
float dot_q6_k_scalar(const void* w, const float* x, int64_t n);
void dequantize_iq2_xxs_scalar(const void* x, float* y, int64_t n);
float dot_iq2_xxs_scalar(const void* w, const float* x, int64_t n);
void dequantize_q4_0_scalar(const void* x, float* y, int64_t n);
float dot_q4_0_scalar(const void* w, const float* x, int64_t n);
void dequantize_q4_1_scalar(const void* x, float* y, int64_t n);
float dot_q4_1_scalar(const void* w, const float* x, int64_t n);
void dequantize_q5_0_scalar(const void* x, float* y, int64_t n);
float dot_q5_0_scalar(const void* w, const float* x, int64_t n);
void dequantize_q5_1_scalar(const void* x, float* y, int64_t n);
float dot_q5_1_scalar(const void* w, const float* x, int64_t n);
void dequantize_q3_k_scalar(const void* x, float* y, int64_t n);
float dot_q3_k_scalar(const void* w, const float* x, int64_t n);
void dequantize_iq4_nl_scalar(const void* x, float* y, int64_t n);
float dot_iq4_nl_scalar(const void* w, const float* x, int64_t n);
void dequantize_iq4_xs_scalar(const void* x, float* y, int64_t n);
float dot_iq4_xs_scalar(const void* w, const float* x, int64_t n);

// AVX2 kernels (avx2_*.cpp). Dequantization is bit-identical to the scalar
// kernels; dot products are fused (dequantize in registers, FMA with x) and
// agree with the reference up to float summation order.
void dequantize_f16_avx2(const void* x, float* y, int64_t n);
float dot_f32_avx2(const void* w, const float* x, int64_t n);
float dot_f16_avx2(const void* w, const float* x, int64_t n);
void dequantize_bf16_avx2(const void* x, float* y, int64_t n);
float dot_bf16_avx2(const void* w, const float* x, int64_t n);
void dequantize_q8_0_avx2(const void* x, float* y, int64_t n);
float dot_q8_0_avx2(const void* w, const float* x, int64_t n);
void dequantize_q2_k_avx2(const void* x, float* y, int64_t n);
float dot_q2_k_avx2(const void* w, const float* x, int64_t n);
void dequantize_q4_k_avx2(const void* x, float* y, int64_t n);
float dot_q4_k_avx2(const void* w, const float* x, int64_t n);
void dequantize_q5_k_avx2(const void* x, float* y, int64_t n);
float dot_q5_k_avx2(const void* w, const float* x, int64_t n);
void dequantize_q6_k_avx2(const void* x, float* y, int64_t n);
float dot_q6_k_avx2(const void* w, const float* x, int64_t n);
void dequantize_iq2_xxs_avx2(const void* x, float* y, int64_t n);
float dot_iq2_xxs_avx2(const void* w, const float* x, int64_t n);
void dequantize_q4_0_avx2(const void* x, float* y, int64_t n);
float dot_q4_0_avx2(const void* w, const float* x, int64_t n);
void dequantize_q4_1_avx2(const void* x, float* y, int64_t n);
float dot_q4_1_avx2(const void* w, const float* x, int64_t n);
void dequantize_q5_0_avx2(const void* x, float* y, int64_t n);
float dot_q5_0_avx2(const void* w, const float* x, int64_t n);
void dequantize_q5_1_avx2(const void* x, float* y, int64_t n);
float dot_q5_1_avx2(const void* w, const float* x, int64_t n);
void dequantize_q3_k_avx2(const void* x, float* y, int64_t n);
float dot_q3_k_avx2(const void* w, const float* x, int64_t n);
void dequantize_iq4_nl_avx2(const void* x, float* y, int64_t n);
float dot_iq4_nl_avx2(const void* w, const float* x, int64_t n);
void dequantize_iq4_xs_avx2(const void* x, float* y, int64_t n);
float dot_iq4_xs_avx2(const void* w, const float* x, int64_t n);

// Row conversions for quantize_row (avx2_half_rows.cpp): same bits as the
// scalar fp32_to_fp16 / fp32_to_bf16.
void fp32_to_fp16_row_avx2(const float* x, uint16_t* y, int64_t n);
void fp32_to_bf16_row_avx2(const float* x, uint16_t* y, int64_t n);

}  // namespace ds4::quant_kernels

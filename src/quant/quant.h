// Block formats of ggml: dequantization and dot products on the CPU.
// Two implementations of each: the scalar reference (quant/scalar_*.cpp),
// readable and bit-faithful to ggml's to_float, and an AVX2 path
// (quant/avx2_*.cpp) selected at run time when the CPU has AVX2+FMA+F16C.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_type.h"

namespace ds4 {

// y[0..n) = dequantize(x). n must be a multiple of the type's block size.
void dequantize_row(GgmlType type, const void* x, float* y, int64_t n);

// sum_i dequantize(w)[i] * x[i] for one row of n elements. Activations stay
// float32 (no 8-bit activation rounding), so results match the exact
// semantics of the format up to float summation order.
float dot_row(GgmlType type, const void* w, const float* x, int64_t n);

// Scalar reference implementations (always available; tests compare the
// dispatching functions above against these and both against libggml).
void dequantize_row_ref(GgmlType type, const void* x, float* y, int64_t n);
float dot_row_ref(GgmlType type, const void* w, const float* x, int64_t n);

// Quantizers for the types ds4 writes itself (synthetic models): F32, F16,
// BF16, Q8_0. Others come from llama-quantize / libggml.
void quantize_row(GgmlType type, const float* x, void* y, int64_t n);
bool quantize_supported(GgmlType type);

// True when the AVX2 path is compiled in and the CPU supports it.
bool quant_has_avx2();

// Half-precision helpers, bit-identical to ggml's conversions: round to
// nearest even, subnormals kept, overflow to inf, NaN quiet (fp16: sign|0x7E00).
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

// Row forms of the same conversions (F16C/AVX2 when the CPU has them; the
// bits are the same either way). n may be any count >= 0.
void fp16_to_fp32_row(const uint16_t* x, float* y, int64_t n);
void fp32_to_fp16_row(const float* x, uint16_t* y, int64_t n);
void bf16_to_fp32_row(const uint16_t* x, float* y, int64_t n);
void fp32_to_bf16_row(const float* x, uint16_t* y, int64_t n);

}  // namespace ds4

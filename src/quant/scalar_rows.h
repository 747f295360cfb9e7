// The row loops every scalar reference kernel shares: decode block by block;
// the reference dot is the float64 sum of the exactly decoded weights times
// x. Each format supplies only its block decoder. Internal linkage (unnamed
// namespace), like the other shared quant helpers, so no copy compiled for
// AVX2 can ever be picked for the scalar path.
#pragma once

#include <cstdint>

namespace ds4::quant_kernels {
namespace {

template <class Block, int N, class Decode>
void dequantize_blocks(const void* x, float* y, int64_t n, Decode decode) {
    const auto* blocks = static_cast<const Block*>(x);
    for (int64_t i = 0; i < n / N; ++i) decode(blocks[i], y + i * N);
}

template <class Block, int N, class Decode>
float dot_blocks(const void* w, const float* x, int64_t n, Decode decode) {
    const auto* blocks = static_cast<const Block*>(w);
    float tmp[N];
    double sum = 0.0;
    for (int64_t i = 0; i < n / N; ++i) {
        decode(blocks[i], tmp);
        for (int j = 0; j < N; ++j) sum += static_cast<double>(tmp[j]) * x[i * N + j];
    }
    return static_cast<float>(sum);
}

}  // namespace
}  // namespace ds4::quant_kernels

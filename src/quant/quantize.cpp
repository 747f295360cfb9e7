// quantize_row for the types ds4 writes itself (synthetic test models):
// F32, F16, BF16 and Q8_0, byte-identical to ggml's reference quantizers.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "common/error.h"
#include "quant/block_layouts.h"
#include "quant/half_bits.h"
#include "quant/quant.h"

namespace ds4 {
namespace {

// ggml's quantize_row_q8_0_ref: d = amax / 127 rounded to half for storage,
// but the quants use the unrounded 1/d; round half away from zero (roundf).
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
    for (int64_t i = 0; i < n / kQ8_0BlockElems; ++i) {
        const float* xb = x + i * kQ8_0BlockElems;
        float amax = 0.0f;
        for (int j = 0; j < kQ8_0BlockElems; ++j) {
            if (!std::isfinite(xb[j]))
                throw Error("cannot quantize element " + std::to_string(i * kQ8_0BlockElems + j) +
                            " to q8_0: it is not a finite number.");
            amax = std::max(amax, std::fabs(xb[j]));
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t dh = float_to_half_bits(d);
        std::memcpy(y[i].d, &dh, 2);
        for (int j = 0; j < kQ8_0BlockElems; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(xb[j] * id));
    }
}

}  // namespace

bool quantize_supported(GgmlType type) {
    return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16 || type == GgmlType::Q8_0;
}

void quantize_row(GgmlType type, const float* x, void* y, int64_t n) {
    if (!quantize_supported(type)) {
        const auto traits = ggml_type_traits(static_cast<uint32_t>(type));
        throw Error("ds4 cannot quantize to " +
                    (traits ? std::string(traits->name) : "type " + std::to_string(static_cast<uint32_t>(type))) +
                    " (it writes f32, f16, bf16 and q8_0; use llama-quantize for the others).");
    }
    const auto& traits = ggml_type_traits(type);
    if (n < 0 || n % traits.block_elems != 0)
        throw Error("quantize_row: a row of " + std::to_string(n) + " elements is not a whole number of " +
                    std::string(traits.name) + " blocks of " + std::to_string(traits.block_elems) + ".");
    if (n > 0 && (x == nullptr || y == nullptr))
        throw Error("quantize_row was given a null pointer for a row of " + std::to_string(n) + " elements.");
    switch (type) {
        case GgmlType::F32:
            if (n > 0) std::memmove(y, x, static_cast<size_t>(n) * sizeof(float));
            return;
        case GgmlType::F16: return fp32_to_fp16_row(x, static_cast<uint16_t*>(y), n);
        case GgmlType::BF16: return fp32_to_bf16_row(x, static_cast<uint16_t*>(y), n);
        case GgmlType::Q8_0: return quantize_q8_0(x, static_cast<BlockQ8_0*>(y), n);
        default: return;
    }
}

}  // namespace ds4

// Tensor element types as numbered by ggml/GGUF, and their block geometry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ds4 {

enum class GgmlType : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
    IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21,
    IQ2_S = 22, IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28,
    IQ1_M = 29, BF16 = 30, TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40,
    Q1_0 = 41, Q2_0 = 42,
};

struct GgmlTypeTraits {
    std::string_view name;   // as ggml spells it: "q4_K", "iq2_xxs", ...
    int64_t block_elems;     // elements per block (1 for plain types)
    size_t block_bytes;      // bytes per block
    bool computable;         // ds4 has dequant/dot kernels for it
};

// Traits of a known type; std::nullopt for a number ggml does not define
// (or whose geometry ds4 does not know, so its size cannot be checked).
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type);
const GgmlTypeTraits& ggml_type_traits(GgmlType type);  // type must be known

std::string_view ggml_type_name(GgmlType type);
std::optional<GgmlType> ggml_type_from_name(std::string_view name);

// Bytes of one row of n elements; n must be a multiple of the block size.
size_t ggml_row_bytes(GgmlType type, int64_t n);

}  // namespace ds4

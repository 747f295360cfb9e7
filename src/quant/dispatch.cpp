// The public dequantize_row / dot_row and their _ref twins: check the type
// and row length once, then call the AVX2 kernel when the CPU has
// AVX2+FMA+F16C, else the scalar reference.
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "common/error.h"
#include "quant/kernels.h"
#include "quant/quant.h"

namespace ds4 {
namespace quant_kernels {

RowKernels scalar_kernels(GgmlType type) {
    switch (type) {
        case GgmlType::F32: return {dequantize_f32_scalar, dot_f32_scalar};
        case GgmlType::F16: return {dequantize_f16_scalar, dot_f16_scalar};
        case GgmlType::BF16: return {dequantize_bf16_scalar, dot_bf16_scalar};
        case GgmlType::Q8_0: return {dequantize_q8_0_scalar, dot_q8_0_scalar};
        case GgmlType::Q2_K: return {dequantize_q2_k_scalar, dot_q2_k_scalar};
        case GgmlType::Q4_K: return {dequantize_q4_k_scalar, dot_q4_k_scalar};
        case GgmlType::Q5_K: return {dequantize_q5_k_scalar, dot_q5_k_scalar};
        case GgmlType::Q6_K: return {dequantize_q6_k_scalar, dot_q6_k_scalar};
        case GgmlType::IQ2_XXS: return {dequantize_iq2_xxs_scalar, dot_iq2_xxs_scalar};
        case GgmlType::Q4_0: return {dequantize_q4_0_scalar, dot_q4_0_scalar};
        case GgmlType::Q4_1: return {dequantize_q4_1_scalar, dot_q4_1_scalar};
        case GgmlType::Q5_0: return {dequantize_q5_0_scalar, dot_q5_0_scalar};
        case GgmlType::Q5_1: return {dequantize_q5_1_scalar, dot_q5_1_scalar};
        case GgmlType::Q3_K: return {dequantize_q3_k_scalar, dot_q3_k_scalar};
        case GgmlType::IQ4_NL: return {dequantize_iq4_nl_scalar, dot_iq4_nl_scalar};
        case GgmlType::IQ4_XS: return {dequantize_iq4_xs_scalar, dot_iq4_xs_scalar};
        default: return {};
    }
}

RowKernels avx2_kernels(GgmlType type) {
    switch (type) {
        case GgmlType::F32: return {dequantize_f32_scalar, dot_f32_avx2};  // dequantizing F32 is a copy
        case GgmlType::F16: return {dequantize_f16_avx2, dot_f16_avx2};
        case GgmlType::BF16: return {dequantize_bf16_avx2, dot_bf16_avx2};
        case GgmlType::Q8_0: return {dequantize_q8_0_avx2, dot_q8_0_avx2};
        case GgmlType::Q2_K: return {dequantize_q2_k_avx2, dot_q2_k_avx2};
        case GgmlType::Q4_K: return {dequantize_q4_k_avx2, dot_q4_k_avx2};
        case GgmlType::Q5_K: return {dequantize_q5_k_avx2, dot_q5_k_avx2};
        case GgmlType::Q6_K: return {dequantize_q6_k_avx2, dot_q6_k_avx2};
        case GgmlType::IQ2_XXS: return {dequantize_iq2_xxs_avx2, dot_iq2_xxs_avx2};
        case GgmlType::Q4_0: return {dequantize_q4_0_avx2, dot_q4_0_avx2};
        case GgmlType::Q4_1: return {dequantize_q4_1_avx2, dot_q4_1_avx2};
        case GgmlType::Q5_0: return {dequantize_q5_0_avx2, dot_q5_0_avx2};
        case GgmlType::Q5_1: return {dequantize_q5_1_avx2, dot_q5_1_avx2};
        case GgmlType::Q3_K: return {dequantize_q3_k_avx2, dot_q3_k_avx2};
        case GgmlType::IQ4_NL: return {dequantize_iq4_nl_avx2, dot_iq4_nl_avx2};
        case GgmlType::IQ4_XS: return {dequantize_iq4_xs_avx2, dot_iq4_xs_avx2};
        default: return {};
    }
}

bool avx2_usable() {
#if defined(__x86_64__) || defined(__i386__)
    // CPUID directly (clang's __builtin_cpu_supports knows no "f16c"):
    // AVX2 + FMA + F16C, and the OS must save YMM state (OSXSAVE + XGETBV).
    static const bool usable = [] {
        unsigned a, b, c, d;
        if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
        const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
        if (!(fma && osxsave && avx && f16c)) return false;
        unsigned xcr0_lo, xcr0_hi;
        __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
        if ((xcr0_lo & 0x6) != 0x6) return false;  // XMM and YMM state enabled
        if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
        return (b & (1u << 5)) != 0;  // AVX2
    }();
    return usable;
#else
    return false;
#endif
}

}  // namespace quant_kernels

namespace {

namespace qk = quant_kernels;

constexpr uint32_t kMaxType = 64;

struct TypeKernels {
    int64_t block_elems = 0;
    qk::RowKernels fast;
    qk::RowKernels ref;
};

// Indexed by type number and built once, so the per-row check is a lookup.
struct KernelTable {
    TypeKernels types[kMaxType];
};

KernelTable build_table() {
    KernelTable t;
    const bool avx2 = qk::avx2_usable();
    for (uint32_t id = 0; id < kMaxType; ++id) {
        const auto traits = ggml_type_traits(id);
        if (!traits) continue;
        const auto type = static_cast<GgmlType>(id);
        TypeKernels& k = t.types[id];
        k.ref = qk::scalar_kernels(type);
        if (!k.ref.dot) continue;
        k.block_elems = traits->block_elems;
        k.fast = avx2 ? qk::avx2_kernels(type) : k.ref;
    }
    return t;
}

const KernelTable& table() {
    static const KernelTable t = build_table();
    return t;
}

std::string type_label(GgmlType type) {
    const auto traits = ggml_type_traits(static_cast<uint32_t>(type));
    return traits ? std::string(traits->name) : "number " + std::to_string(static_cast<uint32_t>(type));
}

[[noreturn]] void throw_not_computable(GgmlType type) {
    if (!ggml_type_traits(static_cast<uint32_t>(type)))
        throw Error("tensor type " + type_label(type) + " is not a ggml type.");
    throw Error("ds4 has no CPU kernels for " + type_label(type) +
                " tensors (it computes with f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, "
                "iq2_xxs, iq4_nl and iq4_xs).");
}

const TypeKernels& checked(GgmlType type, int64_t n, const void* a, const void* b, const char* op) {
    const uint32_t id = static_cast<uint32_t>(type);
    if (id >= kMaxType || table().types[id].block_elems == 0) throw_not_computable(type);
    const TypeKernels& k = table().types[id];
    if (n < 0 || n % k.block_elems != 0)
        throw Error(std::string(op) + ": a row of " + std::to_string(n) + " elements is not a whole number of " +
                    type_label(type) + " blocks of " + std::to_string(k.block_elems) + ".");
    if (n > 0 && (a == nullptr || b == nullptr))
        throw Error(std::string(op) + " was given a null pointer for a row of " + std::to_string(n) + " elements.");
    return k;
}

}  // namespace

void dequantize_row(GgmlType type, const void* x, float* y, int64_t n) {
    checked(type, n, x, y, "dequantize_row").fast.dequantize(x, y, n);
}

float dot_row(GgmlType type, const void* w, const float* x, int64_t n) {
    return checked(type, n, w, x, "dot_row").fast.dot(w, x, n);
}

void dequantize_row_ref(GgmlType type, const void* x, float* y, int64_t n) {
    checked(type, n, x, y, "dequantize_row_ref").ref.dequantize(x, y, n);
}

float dot_row_ref(GgmlType type, const void* w, const float* x, int64_t n) {
    return checked(type, n, w, x, "dot_row_ref").ref.dot(w, x, n);
}

bool quant_has_avx2() { return qk::avx2_usable(); }

}  // namespace ds4

// The dispatching kernels (AVX2 on this machine) against the scalar
// reference, on random blocks: dequantization must match bit for bit, dot
// products to float rounding. Also: bad lengths and types are refused with
// ds4::Error, and the half-precision row conversions agree with the scalar ones.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "quant/quant.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

const GgmlType kComputable[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,    GgmlType::Q4_0,   GgmlType::Q4_1,
                                GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,    GgmlType::Q2_K,   GgmlType::Q3_K,
                                GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,    GgmlType::IQ2_XXS, GgmlType::IQ4_NL,
                                GgmlType::IQ4_XS};

uint64_t fresh_seed() { return ds4::test::test_seed(); }

// Offsets (within a block) of the half-precision scale fields, which random
// bytes must not turn into NaN or inf.
std::vector<size_t> half_fields(GgmlType t) {
    switch (t) {
        case GgmlType::Q8_0: case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::IQ4_NL: return {0};
        case GgmlType::Q4_1: case GgmlType::Q5_1: return {0, 2};
        case GgmlType::Q3_K: return {108};
        case GgmlType::IQ4_XS: return {0};
        case GgmlType::Q2_K: return {80, 82};
        case GgmlType::Q4_K: case GgmlType::Q5_K: return {0, 2};
        case GgmlType::Q6_K: return {208};
        case GgmlType::IQ2_XXS: return {0};
        default: return {};
    }
}

uint16_t random_finite_half(std::mt19937_64& rng) {
    for (;;) {
        const auto h = static_cast<uint16_t>(rng());
        if ((h & 0x7C00) != 0x7C00) return h;
    }
}

// Random raw bytes for a row of n elements of type t, at a deliberately odd
// address inside `storage` so no kernel may rely on alignment.
const uint8_t* random_row(GgmlType t, int64_t n, std::mt19937_64& rng, std::vector<uint8_t>& storage) {
    const auto& tr = ggml_type_traits(t);
    const size_t bytes = ggml_row_bytes(t, n);
    storage.assign(bytes + 1, 0);
    uint8_t* row = storage.data() + 1;
    for (size_t i = 0; i < bytes; ++i) row[i] = static_cast<uint8_t>(rng());
    if (t == GgmlType::F32) {
        std::normal_distribution<float> g(0.0f, 1.0f);
        for (int64_t i = 0; i < n; ++i) {
            const float v = g(rng);
            std::memcpy(row + 4 * i, &v, 4);
        }
    } else if (t == GgmlType::F16) {
        for (int64_t i = 0; i < n; ++i) {
            const uint16_t h = random_finite_half(rng);
            std::memcpy(row + 2 * i, &h, 2);
        }
    } else if (t == GgmlType::BF16) {
        for (int64_t i = 0; i < n; ++i) {  // keep the exponent moderate: |x| in [2^-20, 2^20)
            const auto h = static_cast<uint16_t>((rng() & 0x807F) | ((107 + rng() % 40) << 7));
            std::memcpy(row + 2 * i, &h, 2);
        }
    } else {
        for (int64_t b = 0; b < n / tr.block_elems; ++b)
            for (size_t off : half_fields(t)) {
                const uint16_t h = random_finite_half(rng);
                std::memcpy(row + b * tr.block_bytes + off, &h, 2);
            }
    }
    return row;
}

std::vector<float> random_activations(int64_t n, std::mt19937_64& rng) {
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n) + 1);
    for (auto& v : x) v = g(rng);
    return x;
}

// The kernel's own view of the CPU's features (/proc/cpuinfo), independent of
// the CPUID query dispatch makes (and of the compiler: clang's
// __builtin_cpu_supports knows no "f16c").
bool cpuinfo_has(const std::string& flags, const std::string& f) { return flags.find(" " + f + " ") != std::string::npos; }

TEST(QuantDispatch, Avx2PathIsChosenWhenTheCpuHasIt) {
    std::ifstream in("/proc/cpuinfo");
    std::string line, flags;
    while (std::getline(in, line))
        if (line.rfind("flags", 0) == 0) {
            flags = line.substr(line.find(':') + 1) + " ";
            break;
        }
    ASSERT_FALSE(flags.empty()) << "no flags line in /proc/cpuinfo";
    const bool cpu = cpuinfo_has(flags, "avx2") && cpuinfo_has(flags, "fma") && cpuinfo_has(flags, "f16c");
    EXPECT_EQ(quant_has_avx2(), cpu);
}

TEST(QuantDispatch, DequantizeMatchesReferenceBitForBit) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    std::vector<uint8_t> storage;
    for (GgmlType t : kComputable) {
        const int64_t be = ggml_type_traits(t).block_elems;
        for (int rep = 0; rep < 24; ++rep) {
            const int64_t n = be == 1 ? 1 + static_cast<int64_t>(rng() % 700) : be * (1 + static_cast<int64_t>(rng() % 12));
            SCOPED_TRACE(std::string(ggml_type_name(t)) + " n=" + std::to_string(n));
            const uint8_t* row = random_row(t, n, rng, storage);
            std::vector<float> fast(n + 1), ref(n + 1);
            dequantize_row(t, row, fast.data() + 1, n);  // odd output address too
            dequantize_row_ref(t, row, ref.data() + 1, n);
            for (int64_t i = 1; i <= n; ++i)
                ASSERT_EQ(std::bit_cast<uint32_t>(fast[i]), std::bit_cast<uint32_t>(ref[i]))
                    << "element " << i - 1 << ": " << fast[i] << " vs " << ref[i];
        }
    }
}

TEST(QuantDispatch, DotMatchesReference) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    std::vector<uint8_t> storage;
    for (GgmlType t : kComputable) {
        const int64_t be = ggml_type_traits(t).block_elems;
        for (int rep = 0; rep < 40; ++rep) {
            const int64_t n = be == 1 ? 1 + static_cast<int64_t>(rng() % 5000) : be * (1 + static_cast<int64_t>(rng() % 64));
            SCOPED_TRACE(std::string(ggml_type_name(t)) + " n=" + std::to_string(n));
            const uint8_t* row = random_row(t, n, rng, storage);
            const std::vector<float> xs = random_activations(n, rng);
            const float* x = xs.data() + 1;
            std::vector<float> w(n);
            dequantize_row_ref(t, row, w.data(), n);
            double exact = 0.0, magnitude = 0.0;
            for (int64_t i = 0; i < n; ++i) {
                exact += static_cast<double>(w[i]) * x[i];
                magnitude += std::fabs(static_cast<double>(w[i]) * x[i]);
            }
            const float fast = dot_row(t, row, x, n);
            const float ref = dot_row_ref(t, row, x, n);
            ASSERT_LE(std::fabs(fast - exact), 1e-5 * magnitude) << "dot_row " << fast << " vs exact " << exact;
            ASSERT_LE(std::fabs(ref - exact), 1e-6 * magnitude) << "dot_row_ref " << ref << " vs exact " << exact;
        }
    }
}

TEST(QuantDispatch, RowsThatAreNotWholeBlocksAreRefused) {
    std::vector<uint8_t> w(4096);
    std::vector<float> x(4096), y(4096);
    for (GgmlType t : kComputable) {
        const int64_t be = ggml_type_traits(t).block_elems;
        std::vector<int64_t> bad = {-1, -be};
        if (be > 1) bad.insert(bad.end(), {1, be - 1, be + 1, 3 * be / 2});
        for (int64_t n : bad) {
            SCOPED_TRACE(std::string(ggml_type_name(t)) + " n=" + std::to_string(n));
            EXPECT_THROW(dot_row(t, w.data(), x.data(), n), Error);
            EXPECT_THROW(dot_row_ref(t, w.data(), x.data(), n), Error);
            EXPECT_THROW(dequantize_row(t, w.data(), y.data(), n), Error);
            EXPECT_THROW(dequantize_row_ref(t, w.data(), y.data(), n), Error);
        }
        EXPECT_NO_THROW(dot_row(t, w.data(), x.data(), 0));
        EXPECT_EQ(dot_row(t, nullptr, nullptr, 0), 0.0f);
        EXPECT_THROW(dot_row(t, nullptr, x.data(), be), Error);
    }
    EXPECT_THROW(quantize_row(GgmlType::Q8_0, x.data(), w.data(), 33), Error);
    EXPECT_THROW(quantize_row(GgmlType::F16, x.data(), w.data(), -2), Error);
}

TEST(QuantDispatch, TypesWithoutKernelsAreRefused) {
    std::vector<uint8_t> w(4096);
    std::vector<float> x(4096), y(4096);
    for (GgmlType t : {GgmlType::IQ3_XXS, GgmlType::Q8_1, GgmlType::IQ2_XS, GgmlType::Q8_K, GgmlType::I32,
                       static_cast<GgmlType>(4), static_cast<GgmlType>(77), static_cast<GgmlType>(1u << 31)}) {
        SCOPED_TRACE(static_cast<uint32_t>(t));
        EXPECT_THROW(dot_row(t, w.data(), x.data(), 256), Error);
        EXPECT_THROW(dequantize_row(t, w.data(), y.data(), 256), Error);
        EXPECT_THROW(dot_row_ref(t, w.data(), x.data(), 256), Error);
        EXPECT_THROW(dequantize_row_ref(t, w.data(), y.data(), 256), Error);
        EXPECT_FALSE(quantize_supported(t));
        EXPECT_THROW(quantize_row(t, x.data(), w.data(), 256), Error);
    }
    try {
        dot_row(GgmlType::IQ3_XXS, w.data(), x.data(), 256);
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("iq3_xxs"), std::string::npos) << e.what();
    }
}

TEST(QuantDispatch, QuantizeSupportedTypes) {
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0}) EXPECT_TRUE(quantize_supported(t));
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q2_K, GgmlType::IQ2_XXS, GgmlType::Q6_K}) EXPECT_FALSE(quantize_supported(t));
}

// Q8_0 round trip: every element within half a quantization step of the
// input, plus the error of storing the step d as a half (2^-11 relative,
// times |q| <= 127).
TEST(QuantDispatch, Q8_0RoundTripIsWithinHalfAStep) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> g(0.0f, 3.0f);
    const int64_t n = 32 * 50;
    std::vector<float> x(n), back(n);
    for (auto& v : x) v = g(rng);
    std::vector<uint8_t> q(ggml_row_bytes(GgmlType::Q8_0, n));
    quantize_row(GgmlType::Q8_0, x.data(), q.data(), n);
    dequantize_row(GgmlType::Q8_0, q.data(), back.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
        for (int j = 0; j < 32; ++j)
            ASSERT_NEAR(back[b * 32 + j], x[b * 32 + j], amax / 127.0f * (0.5f + 127.0f / 2048.0f) * 1.01f)
                << "element " << b * 32 + j;
    }
    x[77] = std::nanf("");
    EXPECT_THROW(quantize_row(GgmlType::Q8_0, x.data(), q.data(), n), Error);
}

TEST(QuantHalf, EveryHalfConvertsTheSameInRowsAndScalar) {
    std::vector<uint16_t> all(65536);
    for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
    std::vector<float> rows(65536);
    fp16_to_fp32_row(all.data(), rows.data(), 65536);
    for (uint32_t i = 0; i < 65536; ++i) {
        const float s = fp16_to_fp32(static_cast<uint16_t>(i));
        ASSERT_EQ(std::bit_cast<uint32_t>(rows[i]), std::bit_cast<uint32_t>(s)) << std::hex << "half 0x" << i;
        // Every non-NaN half survives the round trip unchanged.
        if ((i & 0x7FFF) <= 0x7C00) ASSERT_EQ(fp32_to_fp16(s), i) << std::hex << "half 0x" << i;
    }
    bf16_to_fp32_row(all.data(), rows.data(), 65536);
    for (uint32_t i = 0; i < 65536; ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(rows[i]), i << 16);
        ASSERT_EQ(std::bit_cast<uint32_t>(bf16_to_fp32(static_cast<uint16_t>(i))), i << 16);
    }
}

TEST(QuantHalf, FloatToHalfRowsMatchScalarOnRandomBits) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const int64_t n = 200003;  // odd: exercises the scalar tail of the vector loop
    std::vector<float> x(n);
    for (auto& v : x) v = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    // Plus values around the half range: subnormal, normal, overflow edges.
    for (int64_t i = 0; i < n; i += 3)
        x[i] = std::ldexp(std::uniform_real_distribution<float>(1.0f, 2.0f)(rng), static_cast<int>(rng() % 48) - 30);
    std::vector<uint16_t> h(n), b(n);
    fp32_to_fp16_row(x.data(), h.data(), n);
    fp32_to_bf16_row(x.data(), b.data(), n);
    for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(h[i], fp32_to_fp16(x[i])) << std::hex << "float bits 0x" << std::bit_cast<uint32_t>(x[i]);
        ASSERT_EQ(b[i], fp32_to_bf16(x[i])) << std::hex << "float bits 0x" << std::bit_cast<uint32_t>(x[i]);
    }
}

// IEEE facts about binary16 rounding, independent of any implementation.
TEST(QuantHalf, RoundingEdges) {
    EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);
    EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7BFF);
    EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);  // the tie rounds to even: inf
    EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xFC00);
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);            // tie to even: 0
    EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);            // 1.5 steps: tie to even 2
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25) * 1.0001f), 0x0001);  // just above the tie
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1023.5f, -24)), 0x0400);         // rounds up into the normals
    EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);     // tie, even mantissa stays
    EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(3.0f, -11)), 0x3C02);     // tie, odd mantissa rounds up
    EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
    EXPECT_EQ(fp32_to_fp16(std::nanf("")) & 0x7FFF, 0x7E00);
    EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(fp16_to_fp32(0x03FF), std::ldexp(1023.0f, -24));
    EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7C01)));
    EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // tie to even
    EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(3.0f, -8)), 0x3F82);
    EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x7F800001u)), 0x7FC0);  // signalling NaN made quiet
    EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x00012345u)), 0x0001);  // subnormals kept
}

}  // namespace
}  // namespace ds4

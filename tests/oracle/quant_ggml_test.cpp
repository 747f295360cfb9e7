// ds4's block formats against llama.cpp's ggml library (libggml-base.so):
// ggml quantizes fresh random data of several shapes, and our dequantization
// must give its to_float bit for bit, our dot products its float64 dot to
// float rounding. Also: the type table against ggml's, and our quantizers and
// half conversions against ggml's byte for byte.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ggml.h"
#include "support/test_seed.h"
#include "quant/quant.h"

namespace ds4 {
namespace {

using ds4::test::test_seed;

const GgmlType kComputable[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,    GgmlType::Q4_0,   GgmlType::Q4_1,
                                GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,    GgmlType::Q2_K,   GgmlType::Q3_K,
                                GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,    GgmlType::IQ2_XXS, GgmlType::IQ4_NL,
                                GgmlType::IQ4_XS};

ggml_type as_ggml(GgmlType t) { return static_cast<ggml_type>(static_cast<uint32_t>(t)); }

// Shapes of weight data that stress different parts of a format: subnormal
// half scales (tiny), large scales, outliers, one-signed blocks (mins),
// zero blocks, and block-to-block magnitude swings.
struct Distribution {
    const char* name;
    std::function<float(std::mt19937_64&, int64_t)> draw;  // (rng, element index)
};

std::vector<Distribution> distributions(int64_t block) {
    auto normal = [](std::mt19937_64& r) { return std::normal_distribution<float>(0.0f, 1.0f)(r); };
    auto uniform = [](std::mt19937_64& r, float a, float b) { return std::uniform_real_distribution<float>(a, b)(r); };
    return {
        {"normal", [=](auto& r, int64_t) { return normal(r); }},
        {"uniform", [=](auto& r, int64_t) { return uniform(r, -1.0f, 1.0f); }},
        {"large", [=](auto& r, int64_t) { return 2000.0f * normal(r); }},
        {"tiny", [=](auto& r, int64_t) { return 3e-6f * normal(r); }},
        {"outliers", [=](auto& r, int64_t) { return normal(r) * (uniform(r, 0, 1) < 0.01f ? 60.0f : 1.0f); }},
        {"positive", [=](auto& r, int64_t) { return std::exp(normal(r)); }},
        {"sparse", [=](auto& r, int64_t i) {
             const uint64_t blk = static_cast<uint64_t>(i / block);
             if ((blk * 2654435761u >> 7) % 5 == 0) return 0.0f;  // some whole blocks of zeros
             return uniform(r, 0, 1) < 0.5f ? 0.0f : normal(r);
         }},
        {"block_scales", [=](auto& r, int64_t i) {
             const uint64_t blk = static_cast<uint64_t>(i / block);
             return normal(r) * std::pow(10.0f, static_cast<float>(blk * 7919 % 71) / 10.0f - 4.0f);
         }},
    };
}

bool same_bits(const float* a, const float* b, int64_t n, int64_t& first) {
    for (int64_t i = 0; i < n; ++i)
        if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) {
            first = i;
            return false;
        }
    return true;
}

// Row lengths to try: every whole number of blocks 1..64; plain types
// (one-element blocks) get 1..64 and 64 random lengths up to 4096.
std::vector<int64_t> lengths(int64_t block, std::mt19937_64& rng, int64_t& longest) {
    std::vector<int64_t> out;
    for (int64_t k = 1; k <= 64; ++k) out.push_back(k * block);
    if (block == 1)
        for (int k = 0; k < 64; ++k) out.push_back(1 + static_cast<int64_t>(rng() % 4096));
    longest = 0;
    for (int64_t n : out) longest = std::max(longest, n);
    return out;
}

TEST(QuantGgml, TypeTableMatchesGgml) {
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; ++t) {
        SCOPED_TRACE("type " + std::to_string(t));
        const auto ours = ggml_type_traits(t);
        const int64_t blck = ggml_blck_size(static_cast<ggml_type>(t));
        if (blck == 0) {  // a number ggml retired (Q4_2, Q4_0_4_4, ...)
            EXPECT_FALSE(ours.has_value());
            continue;
        }
        ASSERT_TRUE(ours.has_value()) << "ggml knows " << ggml_type_name(static_cast<ggml_type>(t));
        EXPECT_EQ(ours->name, std::string(ggml_type_name(static_cast<ggml_type>(t))));
        EXPECT_EQ(ours->block_elems, blck);
        EXPECT_EQ(ours->block_bytes, ggml_type_size(static_cast<ggml_type>(t)));
        EXPECT_EQ(ggml_type_from_name(ours->name), static_cast<GgmlType>(t));
    }
    for (uint32_t t = GGML_TYPE_COUNT; t < 256; ++t) EXPECT_FALSE(ggml_type_traits(t).has_value()) << t;
    for (GgmlType t : kComputable) EXPECT_TRUE(ggml_type_traits(t).computable) << ggml_type_name(t);
}

class QuantGgmlType : public ::testing::TestWithParam<GgmlType> {};

TEST_P(QuantGgmlType, DequantizeAndDotMatchGgml) {
    const GgmlType type = GetParam();
    const ggml_type gt = as_ggml(type);
    const uint64_t seed = test_seed();
    SCOPED_TRACE(std::string(ggml_type_name(type)) + " " + ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const int64_t block = ggml_blck_size(gt);
    ASSERT_EQ(block, ggml_type_traits(type).block_elems);
    const auto* traits = ggml_get_type_traits(gt);
    ASSERT_TRUE(type == GgmlType::F32 || traits->to_float != nullptr);
    if (type == GgmlType::IQ2_XXS) ggml_quantize_init(gt);

    int64_t longest = 0;
    const std::vector<int64_t> ns = lengths(block, rng, longest);
    const size_t row_bytes = ggml_row_size(gt, longest);
    std::vector<float> src(longest), imatrix(longest), x(longest), theirs(longest), ours(longest + 1);
    std::vector<uint8_t> q(row_bytes), q_odd(row_bytes + 1);

    for (const Distribution& dist : distributions(block)) {
        SCOPED_TRACE(std::string("distribution ") + dist.name);
        for (int64_t i = 0; i < longest; ++i) src[i] = dist.draw(rng, i);
        // A random positive importance matrix: IQ2_XXS needs one; the
        // K-quants take the weighted path with it and the plain one without.
        const bool use_imatrix = ggml_quantize_requires_imatrix(gt) || (rng() & 1);
        for (auto& w : imatrix) w = std::exp(std::normal_distribution<float>(0.0f, 1.5f)(rng));
        const double x_scale = std::pow(10.0, std::uniform_real_distribution<double>(-3, 3)(rng));
        for (auto& v : x) v = static_cast<float>(x_scale * std::normal_distribution<double>(0.0, 1.0)(rng));

        ASSERT_EQ(ggml_quantize_chunk(gt, src.data(), q.data(), 0, 1, longest, use_imatrix ? imatrix.data() : nullptr),
                  row_bytes);
        std::memcpy(q_odd.data() + 1, q.data(), row_bytes);  // our kernels read from an odd address
        const uint8_t* mine = q_odd.data() + 1;

        for (int64_t n : ns) {
            SCOPED_TRACE("n=" + std::to_string(n));
            // A row prefix of whole blocks is itself a valid row.
            if (type == GgmlType::F32)
                std::memcpy(theirs.data(), q.data(), n * sizeof(float));  // ggml's f32 "dequantization" is the data
            else
                traits->to_float(q.data(), theirs.data(), n);

            int64_t bad = -1;
            dequantize_row_ref(type, mine, ours.data() + 1, n);
            ASSERT_TRUE(same_bits(ours.data() + 1, theirs.data(), n, bad))
                << "dequantize_row_ref element " << bad << ": " << ours[bad + 1] << " vs ggml " << theirs[bad];
            dequantize_row(type, mine, ours.data() + 1, n);
            ASSERT_TRUE(same_bits(ours.data() + 1, theirs.data(), n, bad))
                << "dequantize_row element " << bad << ": " << ours[bad + 1] << " vs ggml " << theirs[bad];

            double exact = 0.0, magnitude = 0.0;
            for (int64_t i = 0; i < n; ++i) {
                exact += static_cast<double>(theirs[i]) * x[i];
                magnitude += std::fabs(static_cast<double>(theirs[i]) * x[i]);
            }
            const float fast = dot_row(type, mine, x.data(), n);
            const float ref = dot_row_ref(type, mine, x.data(), n);
            ASSERT_LE(std::fabs(fast - exact), 1e-5 * magnitude) << "dot_row " << fast << " vs exact " << exact;
            ASSERT_LE(std::fabs(ref - exact), 1e-6 * magnitude) << "dot_row_ref " << ref << " vs exact " << exact;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllComputable, QuantGgmlType, ::testing::ValuesIn(kComputable),
                         [](const auto& info) { return std::string(ggml_type_name(info.param)); });

TEST(QuantGgml, Q8_0QuantizerMatchesGgmlBytes) {
    const uint64_t seed = test_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const int64_t n = 32 * 257;
    std::vector<float> src(n);
    std::vector<uint8_t> theirs(ggml_row_size(GGML_TYPE_Q8_0, n)), ours(theirs.size());
    for (const Distribution& dist : distributions(32)) {
        SCOPED_TRACE(dist.name);
        for (int64_t i = 0; i < n; ++i) src[i] = dist.draw(rng, i);
        // Exact ties of the rounding (x*id = k + 0.5) are rare in random data; plant some.
        for (int64_t b = 0; b < n / 32; b += 3) {
            src[b * 32] = 127.0f;
            src[b * 32 + 1] = 2.5f;
            src[b * 32 + 2] = -0.5f;
        }
        ggml_quantize_chunk(GGML_TYPE_Q8_0, src.data(), theirs.data(), 0, 1, n, nullptr);
        quantize_row(GgmlType::Q8_0, src.data(), ours.data(), n);
        ASSERT_EQ(std::memcmp(ours.data(), theirs.data(), ours.size()), 0);
    }
}

std::vector<float> random_float_bits(std::mt19937_64& rng, int64_t n) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) {
        switch (rng() % 4) {
            case 0: v[i] = std::bit_cast<float>(static_cast<uint32_t>(rng())); break;  // anything, NaN included
            case 1:  // the half range and its edges: subnormal, normal, overflow
                v[i] = std::ldexp(std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng), static_cast<int>(rng() % 50) - 32);
                break;
            case 2: v[i] = std::bit_cast<float>(static_cast<uint32_t>(rng() & 0x8000FFFFu) | 0x33000000u); break;  // near 2^-25
            default: v[i] = std::normal_distribution<float>(0.0f, 1.0f)(rng); break;
        }
    }
    return v;
}

TEST(QuantGgml, HalfQuantizersMatchGgmlBytes) {
    const uint64_t seed = test_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const int64_t n = 100003;
    std::vector<float> src = random_float_bits(rng, n);
    src[0] = INFINITY, src[1] = -INFINITY, src[2] = 65520.0f, src[3] = 65519.0f, src[4] = -0.0f;
    src[5] = std::bit_cast<float>(0x7F800001u), src[6] = std::bit_cast<float>(0xFFC12345u);

    std::vector<uint16_t> theirs(n), ours(n), chunk(n);
    ggml_fp32_to_fp16_row(src.data(), theirs.data(), n);
    quantize_row(GgmlType::F16, src.data(), ours.data(), n);
    ggml_quantize_chunk(GGML_TYPE_F16, src.data(), chunk.data(), 0, 1, n, nullptr);
    for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(ours[i], theirs[i]) << std::hex << "f16 of float bits 0x" << std::bit_cast<uint32_t>(src[i]);
        ASSERT_EQ(ours[i], chunk[i]) << std::hex << "f16 of float bits 0x" << std::bit_cast<uint32_t>(src[i]);
        ASSERT_EQ(fp32_to_fp16(src[i]), ggml_fp32_to_fp16(src[i]));
    }

    std::vector<ggml_bf16_t> theirs_bf(n);
    ggml_fp32_to_bf16_row(src.data(), theirs_bf.data(), n);
    quantize_row(GgmlType::BF16, src.data(), ours.data(), n);
    ggml_quantize_chunk(GGML_TYPE_BF16, src.data(), chunk.data(), 0, 1, n, nullptr);
    for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(ours[i], theirs_bf[i].bits) << std::hex << "bf16 of float bits 0x" << std::bit_cast<uint32_t>(src[i]);
        ASSERT_EQ(ours[i], chunk[i]) << std::hex << "bf16 of float bits 0x" << std::bit_cast<uint32_t>(src[i]);
        ASSERT_EQ(fp32_to_bf16(src[i]), ggml_fp32_to_bf16(src[i]).bits);
    }

    std::vector<float> f32(n);
    ggml_quantize_chunk(GGML_TYPE_F32, src.data(), f32.data(), 0, 1, n, nullptr);
    std::vector<float> ours_f32(n);
    quantize_row(GgmlType::F32, src.data(), ours_f32.data(), n);
    ASSERT_EQ(std::memcmp(ours_f32.data(), f32.data(), n * sizeof(float)), 0);
}

TEST(QuantGgml, EveryHalfDecodesLikeGgml) {
    std::vector<uint16_t> all(65536);
    for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
    std::vector<float> rows(65536);
    fp16_to_fp32_row(all.data(), rows.data(), 65536);
    for (uint32_t i = 0; i < 65536; ++i) {
        const uint32_t want = std::bit_cast<uint32_t>(ggml_fp16_to_fp32(static_cast<ggml_fp16_t>(i)));
        ASSERT_EQ(std::bit_cast<uint32_t>(fp16_to_fp32(static_cast<uint16_t>(i))), want) << std::hex << "half 0x" << i;
        ASSERT_EQ(std::bit_cast<uint32_t>(rows[i]), want) << std::hex << "half 0x" << i;
        ggml_bf16_t b;
        b.bits = static_cast<uint16_t>(i);
        ASSERT_EQ(std::bit_cast<uint32_t>(bf16_to_fp32(b.bits)), std::bit_cast<uint32_t>(ggml_bf16_to_fp32(b)));
    }
}

}  // namespace
}  // namespace ds4

// AVX2 kernels for IQ2_XXS. The codebook and the sign codes are expanded
// once, at compile time, into tables of ready-made vectors: a group of 8
// weights is then one load of its grid vector as floats, one XOR with its
// sign mask and one FMA with the activations.
#pragma GCC optimize("fp-contract=off")  // dequantization must round exactly like the scalar reference

#include "quant/avx2_common.h"
#include "quant/block_layouts.h"
#include "quant/iq2_xxs_grid.h"
#include "quant/kernels.h"

namespace ds4::quant_kernels {
namespace {

constexpr int kN = kSuperBlockElems;

struct GridVectors {
    float v[256][8];
};
struct SignMasks {
    uint32_t v[128][8];  // 0x80000000 in the lanes that are negated
};

constexpr GridVectors make_grid_vectors() {
    GridVectors t{};
    for (int i = 0; i < 256; ++i)
        for (int j = 0; j < 8; ++j) t.v[i][j] = static_cast<float>((kIq2xxsGrid[i] >> (8 * j)) & 0xFF);
    return t;
}

constexpr SignMasks make_sign_masks() {
    SignMasks t{};
    for (uint32_t c = 0; c < 128; ++c)
        for (int j = 0; j < 8; ++j) t.v[c][j] = ((iq2_sign_bits(c) >> j) & 1) ? 0x80000000u : 0u;
    return t;
}

alignas(32) constexpr GridVectors kGridVectors = make_grid_vectors();
alignas(32) constexpr SignMasks kSignMasks = make_sign_masks();

inline __m256 grid_vector(uint8_t index) { return _mm256_load_ps(kGridVectors.v[index]); }
inline __m256 sign_mask(uint32_t codes, int l) {
    return _mm256_load_ps(reinterpret_cast<const float*>(kSignMasks.v[(codes >> (7 * l)) & 127]));
}

// The 32-weight group scale, rounded as ggml rounds it: (d * (0.5 + s)) * 0.25.
inline float group_scale(float d, uint32_t codes) {
    return d * (0.5f + static_cast<float>(codes >> 28)) * 0.25f;
}

}  // namespace

void dequantize_iq2_xxs_avx2(const void* xv, float* y, int64_t n) {
    const auto* blocks = static_cast<const BlockIQ2XXS*>(xv);
    for (int64_t i = 0; i < n / kN; ++i) {
        const float d = half_at(blocks[i].d);
        for (int g = 0; g < 8; ++g) {
            const uint8_t* q = blocks[i].qs + 8 * g;
            const uint32_t codes = load_u32(q + 4);
            const __m256 db = _mm256_set1_ps(group_scale(d, codes));
            float* out = y + i * kN + 32 * g;
            for (int l = 0; l < 4; ++l)
                _mm256_storeu_ps(out + 8 * l, _mm256_xor_ps(_mm256_mul_ps(grid_vector(q[l]), db), sign_mask(codes, l)));
        }
    }
}

float dot_iq2_xxs_avx2(const void* wv, const float* x, int64_t n) {
    const auto* blocks = static_cast<const BlockIQ2XXS*>(wv);
    __m256d total = _mm256_setzero_pd();
    for (int64_t i = 0; i < n / kN; ++i) {
        const float d = half_at(blocks[i].d);
        const float* xb = x + i * kN;
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int g = 0; g < 8; ++g) {
            const uint8_t* q = blocks[i].qs + 8 * g;
            const uint32_t codes = load_u32(q + 4);
            const float* xg = xb + 32 * g;
            __m256 p[4];
            for (int l = 0; l < 4; ++l)
                p[l] = _mm256_mul_ps(_mm256_xor_ps(grid_vector(q[l]), sign_mask(codes, l)), _mm256_loadu_ps(xg + 8 * l));
            const __m256 s = _mm256_add_ps(_mm256_add_ps(p[0], p[1]), _mm256_add_ps(p[2], p[3]));
            acc[g & 1] = _mm256_fmadd_ps(_mm256_set1_ps(group_scale(d, codes)), s, acc[g & 1]);
        }
        total = add_to_double(total, _mm256_add_ps(acc[0], acc[1]));
    }
    return static_cast<float>(hsum(total));
}

}  // namespace ds4::quant_kernels

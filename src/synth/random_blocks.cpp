#include "synth/random_blocks.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "quant/block_layouts.h"
#include "quant/block_layouts_fallback.h"  // BlockQ3K
#include "quant/quant.h"
#include "synth/parallel_fill.h"
#include "synth/weights.h"

namespace ds4 {

namespace {

void put_half(uint8_t* p, float v) {
    const uint16_t h = fp32_to_fp16(v);
    p[0] = static_cast<uint8_t>(h & 0xff);
    p[1] = static_cast<uint8_t>(h >> 8);
}

// ggml's legacy blocks (ggml-common.h): d, [m], [qh[4]], qs[16].
constexpr size_t kLegacyD = 0, kLegacyM = 2;

// Writes block `index` of a tensor of `type`. The standard deviations below
// are those of the dequantized value over uniformly random fields (the
// derivation is the variance of a product/difference of independent
// uniform integers); the min terms are chosen to centre blocks on zero.
void random_block(GgmlType type, float sigma, uint64_t seed, uint64_t index, uint8_t* block, size_t block_bytes) {
    const uint64_t base = splitmix64(seed ^ splitmix64(index));
    for (size_t i = 0; i < block_bytes; i += 8) {
        const uint64_t h = splitmix64(base + i);
        std::memcpy(block + i, &h, std::min<size_t>(8, block_bytes - i));
    }
    // Jitter the scale per block (0.75x..1.25x) like real data.
    const float jitter = 0.75f + 0.5f * static_cast<float>(base >> 40) / 16777216.0f;
    switch (type) {
        case GgmlType::Q2_K: {
            // x = d*sc*q - dmin*m, sc, m in 0..15, q in 0..3: std ~ 14 d
            // when dmin = 1.5 d.
            const float d = sigma / 14.0f * jitter;
            put_half(block + offsetof(BlockQ2K, d), d);
            put_half(block + offsetof(BlockQ2K, dmin), 1.5f * d);
            break;
        }
        case GgmlType::Q3_K: {
            // x = d*(sc-32)*(q-4h), 6-bit sc, 2-bit q, h = 1 - hmask bit:
            // std ~ 43.3 d (mean 0.25 d).
            put_half(block + offsetof(BlockQ3K, d), sigma / 43.3f * jitter);
            break;
        }
        case GgmlType::Q4_K: {
            // x = d*sc*q - dmin*m, 6-bit sc and m, q in 0..15: std ~ 258 d
            // when dmin = 7.5 d.
            const float d = sigma / 256.0f * jitter;
            put_half(block + offsetof(BlockQ4K, d), d);
            put_half(block + offsetof(BlockQ4K, dmin), 7.5f * d);
            break;
        }
        case GgmlType::Q5_K: {
            // As Q4_K with q in 0..31: std ~ 527 d when dmin = 15.5 d.
            const float d = sigma / 527.0f * jitter;
            put_half(block + offsetof(BlockQ5K, d), d);
            put_half(block + offsetof(BlockQ5K, dmin), 15.5f * d);
            break;
        }
        case GgmlType::Q6_K: {
            // x = d*sc*(q-32), int8 sc, q in 0..63: std ~ 1366 d.
            const float d = sigma / 1366.0f * jitter;
            put_half(block + offsetof(BlockQ6K, d), d);
            break;
        }
        case GgmlType::IQ2_XXS: {
            // x = d * (0.5 + s) / 4 * grid * sign, s in 0..15, grid values
            // 8/25/43: std ~ 60 d.
            const float d = sigma / 60.0f * jitter;
            put_half(block + offsetof(BlockIQ2XXS, d), d);
            break;
        }
        case GgmlType::Q4_0: {
            // x = d*(q-8), q in 0..15: std ~ 4.64 d.
            put_half(block + kLegacyD, sigma / 4.64f * jitter);
            break;
        }
        case GgmlType::Q5_0: {
            // x = d*(q-16), q in 0..31: std ~ 9.25 d.
            put_half(block + kLegacyD, sigma / 9.25f * jitter);
            break;
        }
        case GgmlType::Q5_1: {
            // x = d*q + m, q in 0..31: std ~ 9.23 d, centred by m = -15.5 d.
            const float d = sigma / 9.23f * jitter;
            put_half(block + kLegacyD, d);
            put_half(block + kLegacyM, -15.5f * d);
            break;
        }
        default:
            throw Error("internal: no random-block writer for " + std::string(ggml_type_name(type)) + ".");
    }
}

void fill_serial(GgmlType type, float sigma, uint64_t seed, uint64_t offset, uint8_t* dst, size_t n) {
    const size_t bb = ggml_type_traits(type).block_bytes;
    std::vector<uint8_t> block(bb);
    const uint64_t end = offset + n;
    for (uint64_t b = offset / bb; b * bb < end; ++b) {
        const uint64_t from = std::max<uint64_t>(b * bb, offset), to = std::min<uint64_t>((b + 1) * bb, end);
        if (from == b * bb && to == (b + 1) * bb) {
            random_block(type, sigma, seed, b, dst + (from - offset), bb);  // whole block in place
        } else {
            random_block(type, sigma, seed, b, block.data(), bb);
            std::memcpy(dst + (from - offset), block.data() + (from - b * bb), to - from);
        }
    }
}

}  // namespace

bool random_blocks_supported(GgmlType t) {
    switch (t) {
        case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
        case GgmlType::IQ2_XXS: case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q5_1:
            return true;
        default:
            return false;
    }
}

void fill_random_blocks(GgmlType type, float sigma, uint64_t seed, uint64_t offset, uint8_t* dst, size_t n) {
    if (!random_blocks_supported(type))
        throw Error("internal: no random-block writer for " + std::string(ggml_type_name(type)) + ".");
    // fill_serial handles parts that start or end inside a block, so the
    // bytes do not depend on where the parts are cut.
    parallel_fill(n, ggml_type_traits(type).block_bytes, [&](size_t begin, size_t end) {
        fill_serial(type, sigma, seed, offset + begin, dst + begin, end - begin);
    });
}

}  // namespace ds4

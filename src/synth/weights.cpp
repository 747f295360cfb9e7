#include "synth/weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "quant/quant.h"
#include "synth/parallel_fill.h"

namespace ds4 {

uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;

// Elements [first, first + count) of the tensor, as floats. Output k of the
// SplitMix64 stream started at `seed` gives two 32-bit uniforms: element i
// uses half (i & 1) of output i / 2, so any element is reachable directly.
void generate(const WeightDistribution& dist, uint64_t seed, uint64_t first, size_t count, float* out) {
    const float scale = 2.0f * dist.half_width / 4294967296.0f;
    const float base = dist.center - dist.half_width;
    auto value = [&](uint32_t u) { return base + scale * static_cast<float>(u); };
    size_t k = 0;
    uint64_t i = first;
    if ((i & 1) && k < count) {  // odd start: the upper half of its pair
        out[k++] = value(static_cast<uint32_t>(splitmix64(seed + (i >> 1) * kGolden) >> 32));
        ++i;
    }
    for (; k + 1 < count; k += 2, i += 2) {  // whole pairs: one hash each
        const uint64_t h = splitmix64(seed + (i >> 1) * kGolden);
        out[k] = value(static_cast<uint32_t>(h));
        out[k + 1] = value(static_cast<uint32_t>(h >> 32));
    }
    if (k < count) out[k] = value(static_cast<uint32_t>(splitmix64(seed + (i >> 1) * kGolden)));
}

}  // namespace

WeightDistribution WeightDistribution::scaled_by_fan_in(int64_t fan_in) {
    return with_stddev(1.0 / std::sqrt(static_cast<double>(fan_in > 0 ? fan_in : 1)));
}

WeightDistribution WeightDistribution::with_stddev(double stddev) {
    // A uniform distribution on [-a, a] has standard deviation a / sqrt(3).
    return {0.0f, static_cast<float>(stddev * std::sqrt(3.0))};
}

WeightDistribution WeightDistribution::near_one(float spread) { return {1.0f, spread}; }

uint64_t tensor_seed(uint64_t model_seed, const std::string& tensor_name) {
    // FNV-1a over the name, mixed with the model seed.
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : tensor_name) h = (h ^ c) * 0x100000001b3ull;
    return splitmix64(model_seed ^ splitmix64(h));
}

namespace {

void fill_serial(GgmlType type, const WeightDistribution& dist, uint64_t seed, uint64_t offset, uint8_t* dst,
                 size_t n) {
    const auto& traits = ggml_type_traits(type);
    const uint64_t block_bytes = traits.block_bytes;
    const uint64_t block_elems = static_cast<uint64_t>(traits.block_elems);
    // Work in batches of whole blocks so a 16 MiB chunk needs only a small
    // scratch buffer.
    constexpr uint64_t kBatchElems = 1 << 16;
    const uint64_t batch_blocks = std::max<uint64_t>(1, kBatchElems / block_elems);
    thread_local std::vector<float> values;
    thread_local std::vector<uint8_t> packed;
    values.resize(batch_blocks * block_elems);
    packed.resize(batch_blocks * block_bytes);

    uint64_t block = offset / block_bytes;
    const uint64_t end = offset + n;
    while (block * block_bytes < end) {
        const uint64_t nb = std::min<uint64_t>(batch_blocks, (end - block * block_bytes + block_bytes - 1) / block_bytes);
        generate(dist, seed, block * block_elems, nb * block_elems, values.data());
        quantize_row(type, values.data(), packed.data(), static_cast<int64_t>(nb * block_elems));
        // Copy the part of these blocks that lies inside [offset, end).
        const uint64_t batch_begin = block * block_bytes;
        const uint64_t batch_end = batch_begin + nb * block_bytes;
        const uint64_t from = std::max(batch_begin, offset);
        const uint64_t to = std::min(batch_end, end);
        std::memcpy(dst + (from - offset), packed.data() + (from - batch_begin), to - from);
        block += nb;
    }
}

}  // namespace

void fill_random_bytes(GgmlType type, const WeightDistribution& dist, uint64_t seed, uint64_t offset,
                       uint8_t* dst, size_t n) {
    // The real-size presets hold tens of billions of weights, and making
    // and packing them is the slow part: split each chunk across threads.
    parallel_fill(n, ggml_type_traits(type).block_bytes, [&](size_t begin, size_t end) {
        fill_serial(type, dist, seed, offset + begin, dst + begin, end - begin);
    });
}

}  // namespace ds4

#include "synth/random_tensor.h"

#include <cmath>
#include <cstdio>

#include "common/error.h"
#include "gguf/gguf_writer.h"
#include "synth/random_blocks.h"

namespace ds4 {

void add_random_tensor(GgufWriter& w, const std::string& name, GgmlType type, std::vector<int64_t> ne,
                       const WeightDistribution& dist, uint64_t model_seed, bool progress) {
    const int64_t block = ggml_type_traits(type).block_elems;
    if (ne[0] % block != 0)
        throw UsageError("tensor " + name + " has rows of " + std::to_string(ne[0]) + " elements, not whole " +
                         std::string(ggml_type_name(type)) + " blocks of " + std::to_string(block));
    const uint64_t seed = tensor_seed(model_seed, name);
    const bool blocks = random_blocks_supported(type);
    const float sigma = dist.half_width / std::sqrt(3.0f);  // uniform [c-a, c+a]: a/sqrt(3)
    w.add_tensor_streamed(name, type, std::move(ne), [=](uint64_t offset, uint8_t* dst, size_t n) {
        if (progress && offset == 0) std::fprintf(stderr, "ds4-gguf: writing %s\n", name.c_str());
        if (blocks) fill_random_blocks(type, sigma, seed, offset, dst, n);
        else fill_random_bytes(type, dist, seed, offset, dst, n);
    });
}

}  // namespace ds4

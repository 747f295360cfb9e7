// Random weights for synthetic models, generated chunk by chunk so a tensor
// of any size streams to disk without being held in memory.
//
// Values come from a counter-based generator (SplitMix64 of seed and element
// index), so any byte range of a tensor can be produced on its own and the
// same (seed, tensor) always yields the same bytes, whichever chunk size the
// writer uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gguf/ggml_type.h"

namespace ds4 {

// How the float values of a tensor are distributed before conversion to its
// storage type: uniform in [center - half_width, center + half_width].
struct WeightDistribution {
    float center = 0.0f;
    float half_width = 1.0f;

    // Mean 0, standard deviation 1/sqrt(fan_in): keeps activations of a
    // matrix product near unit scale whatever the width.
    static WeightDistribution scaled_by_fan_in(int64_t fan_in);
    // Mean 0, standard deviation `stddev`.
    static WeightDistribution with_stddev(double stddev);
    // Around 1 (RMS-norm gains): 1 +- spread.
    static WeightDistribution near_one(float spread);
};

// SplitMix64's output function: the counter-based hash every synthetic
// value (floats, random quant blocks, hash-routing tables) is drawn from.
uint64_t splitmix64(uint64_t x);

// A stable per-tensor seed from the model seed and the tensor's name.
uint64_t tensor_seed(uint64_t model_seed, const std::string& tensor_name);

// Writes bytes [offset, offset + n) of a tensor of `type` whose elements are
// drawn from `dist` with `seed`. Blocks split by the range are produced whole
// and cut, so consecutive calls tile the tensor exactly.
void fill_random_bytes(GgmlType type, const WeightDistribution& dist, uint64_t seed, uint64_t offset,
                       uint8_t* dst, size_t n);

}  // namespace ds4

// What a synthetic-model generator wrote.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds4 {

struct SynthResult {
    size_t tensors = 0;
    uint64_t file_bytes = 0;
    int64_t n_vocab = 0;
    int n_layer = 0;  // block_count
};

}  // namespace ds4

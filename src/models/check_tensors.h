// --check-tensors: every value of the weights a process uses, dequantized
// row by row with the quant kernels and tested for NaN and infinity (what
// llama.cpp's --check-tensors does). It reads every byte of those tensors,
// which for a 300 GB model takes minutes, so it runs only when asked; a
// normal load reads no tensor data at all.
#pragma once

#include <cstdint>

#include "gguf/gguf_file.h"
#include "mapping/model_map.h"

namespace ds4 {

struct TensorCheckStats {
    uint64_t tensors = 0;  // tensors whose values were read
    uint64_t bytes = 0;
};

// Checks the floating-point tensors `sel` selects (those of the layers the
// process runs, the embedding and the head), on n_threads threads. Integer
// tables (routing ids) have no NaN and are left to their users. Throws
// ds4::Error naming the file, the first bad tensor in file order and the
// first bad row and column in it.
TensorCheckStats check_tensor_values(const GgufFile& file, ModelMap& map, const MapSelection& sel, int n_threads);

}  // namespace ds4

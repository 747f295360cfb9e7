// Random quantized blocks: a synthetic model in a block format without
// quantizing any floats.
//
// The weights are random anyway, so each block is random bytes (every bit
// pattern of the quant, sub-block scale and grid/sign-index fields of these
// formats is valid) with its half-precision block scales (d, and dmin or m
// where the format has one) overwritten by finite values chosen so the
// dequantized weights have mean ~0 and a standard deviation near `sigma`.
// Generating bytes is ~50x faster than quantizing floats, which is what
// makes a 17 GB Q4_K_M model in seconds possible.
//
// Blocks come from a counter-based hash of (seed, block index): any byte
// range of a tensor can be produced on its own, and the bytes depend only on
// (type, sigma, seed), not on chunking or threads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_type.h"

namespace ds4 {

// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ2_XXS, Q4_0, Q5_0, Q5_1.
bool random_blocks_supported(GgmlType type);

// Writes bytes [offset, offset + n) of such a tensor (split across threads
// when n is large). Throws ds4::Error for a type random_blocks_supported
// rejects.
void fill_random_blocks(GgmlType type, float sigma, uint64_t seed, uint64_t offset, uint8_t* dst, size_t n);

}  // namespace ds4

// Hidden rows on the wire between pipeline stages (--dist-activation-bits):
// f32 (exact: the same logits as one process), f16 (half the bytes), or
// 8-bit symmetric with one f32 scale per kScaleBlock values of each row
// (about a quarter; bounded error).
// Logits always travel as f32.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/bulk_floats.h"
#include "pipeline.pb.h"

namespace ds4 {

namespace wire = ds4::pipeline::v1;

inline constexpr int64_t kScaleBlock = 64;

// Throws ds4::Error when bits is not 32, 16 or 8, or values.size() != rows x cols.
void encode_activations(std::span<const float> values, int64_t rows, int64_t cols, int bits,
                        wire::Activations& out);
// Throws ds4::Error on a message whose sizes do not add up (a peer's bug or
// a corrupted message must not become a wrong token).
std::vector<float> decode_activations(const wire::Activations& a);
// Bytes of the payload (data + scales).
uint64_t activation_bytes(const wire::Activations& a);
// What a step's result carries back: its activations (logits or final
// hidden rows) and its candidate tokens (ids and logits, 4 bytes each).
uint64_t result_bytes(const wire::Result& r);

// A KV snapshot's tensor as it travels (raw f32 bytes). False when the bytes
// are not whole floats (a torn message). An empty tensor (a layer that keeps
// no state of that kind) is valid and copies nothing.
bool state_tensor_from_bytes(const std::string& bytes, StateFloats& out);

}  // namespace ds4

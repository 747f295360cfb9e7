// Binding GGUF tensors to WeightRefs with shape checks, shared by families.
#pragma once

#include <initializer_list>
#include <string>

#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"

namespace ds4 {

class WeightBinder {
public:
    WeightBinder(const GgufFile& file, ModelMap& map) : file_(file), map_(map) {}

    // The tensor `name` with exactly the shape `ne` (ggml order; trailing
    // dims of 1 may be omitted). Throws naming the file, tensor and shape.
    WeightRef require(const std::string& name, std::initializer_list<int64_t> ne);
    // Same, but an absent tensor gives an empty WeightRef.
    WeightRef optional(const std::string& name, std::initializer_list<int64_t> ne);
    // Optional F32 scale tensor with n elements (llama.cpp's ".scale").
    WeightRef optional_scale(const std::string& name, int64_t n);

private:
    WeightRef bind(const GgufTensorInfo& t, std::initializer_list<int64_t> ne);
    const GgufFile& file_;
    ModelMap& map_;
};

}  // namespace ds4

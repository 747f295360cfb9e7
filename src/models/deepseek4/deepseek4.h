// DeepSeek V4 Flash / PRO (GGUF architecture `deepseek4`).
#pragma once

#include <memory>

#include "models/family.h"

namespace ds4 {

std::unique_ptr<Model> load_deepseek4(const GgufFile& file, ModelMap& map, const LoadOptions& opts);

}  // namespace ds4

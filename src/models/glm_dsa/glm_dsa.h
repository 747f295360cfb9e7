// GLM-5.x (GGUF architecture `glm-dsa`): pre-norm decoder blocks with
// multi-head latent attention restricted by DeepSeek sparse attention's
// lightning indexer, dense SwiGLU FFNs in the leading blocks and
// sigmoid-routed experts plus a shared expert after them. MTP blocks are
// checked, not run.
#pragma once

#include <memory>

#include "models/family.h"

namespace ds4 {

std::unique_ptr<Model> load_glm_dsa(const GgufFile& file, ModelMap& map, const LoadOptions& opts);

}  // namespace ds4

// The ds4 program's command line as engine options.
#pragma once

#include <memory>

#include "cli/ds4_options.h"
#include "engine/engine.h"

namespace ds4 {

// Opens the engine: backend, file, chat template (unless only raw token ids
// are evaluated, or a pipeline worker runs), the model or its layer slice.
std::unique_ptr<Engine> open_engine(const Ds4Options& opts);

}  // namespace ds4

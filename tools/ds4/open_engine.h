// The ds4 program's command line as engine options.
#pragma once

#include <memory>

#include "cli/ds4_options.h"
#include "engine/engine.h"

namespace ds4 {

// Refuses what this build cannot run yet (the pipeline, SSD streaming, a
// layer slice alone) with one sentence, then opens the engine: backend,
// file, chat template (unless only raw token ids are evaluated), model.
std::unique_ptr<Engine> open_engine(const Ds4Options& opts);

}  // namespace ds4

// Text generation for the ds4 program: one prompt, or an interactive chat.
#pragma once

#include "cli/ds4_options.h"
#include "engine/engine.h"

namespace ds4 {

int run_prompt(Engine& engine, const Ds4Options& opts);
int run_interactive(Engine& engine, const Ds4Options& opts);

}  // namespace ds4

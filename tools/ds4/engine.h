// What the ds4 program loads once: file, model map, model, backend,
// tokenizer. Frontends build sessions on top of it.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "cli/ds4_options.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/family.h"

namespace ds4 {

struct Engine {
    std::unique_ptr<GgufFile> file;
    std::unique_ptr<ModelMap> map;
    std::unique_ptr<Model> model;
    std::unique_ptr<Backend> backend;
};

// Opens the model named by the options and prints the model map line to
// stderr. Throws ds4::Error with the loader's sentence.
Engine load_engine(const Ds4Options& opts);

}  // namespace ds4

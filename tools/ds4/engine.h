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
    std::string chat_template;  // the renderer prompts and chats use ("" for --dump-logits)
};

// Opens the model named by the options, chooses its chat template (printing
// the choice's warning, if any) and prints the model map line to stderr.
// Throws ds4::Error with the loader's sentence, or choose_chat_template's.
Engine load_engine(const Ds4Options& opts);

}  // namespace ds4

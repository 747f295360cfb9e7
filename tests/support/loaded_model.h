// A whole model file loaded for tests that drive the model directly (not
// through the engine): the file, its one-region map and the model.
#pragma once

#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/family.h"

namespace ds4::test {

struct LoadedModel {
    std::unique_ptr<GgufFile> file;
    std::unique_ptr<ModelMap> map;
    std::unique_ptr<Model> model;
};

inline LoadedModel load_whole_model(const std::string& path) {
    LoadedModel l;
    l.file = GgufFile::open(path);
    l.map = ModelMap::build(*l.file, MapSelection{});
    l.model = load_model(*l.file, *l.map);
    return l;
}

}  // namespace ds4::test

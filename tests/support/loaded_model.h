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

// The same file with a map that holds no routed expert and a model whose
// experts come from a weight source the test sets (expert cache, windows).
inline LoadedModel load_without_experts(const std::string& path) {
    LoadedModel l;
    l.file = GgufFile::open(path);
    MapSelection sel;
    sel.routed_experts = false;
    l.map = ModelMap::build(*l.file, sel);
    LoadOptions lo;
    lo.resident_experts = false;
    l.model = load_model(*l.file, *l.map, lo);
    return l;
}

}  // namespace ds4::test

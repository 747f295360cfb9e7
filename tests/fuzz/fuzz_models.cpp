// Fuzz target for the model loaders: any bytes, as a GGUF file, go through
// the model map and load_model (every family the registry knows), then the
// --check-tensors scan; only ds4::Error may come out, never a crash, a
// sanitizer report or another exception. What loads must keep the loader's
// promises (a vocabulary, a width, a layer range inside the model). The
// seed corpus (tests/fuzz/corpus/fuzz_models) holds micro models of both
// families, so mutations start from files that load.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/error.h"
#include "fuzz_support.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/check_tensors.h"
#include "models/family.h"

namespace {

using namespace ds4;

void check_info(const Model& m, const GgufFile& f, const LoadOptions& opts) {
    const ModelInfo& info = m.info();
    FUZZ_REQUIRE(info.arch == f.architecture());
    FUZZ_REQUIRE(info.n_vocab >= 1 && info.n_embd >= 1 && info.n_layer >= 1);
    FUZZ_REQUIRE(0 <= info.layers.begin && info.layers.begin < info.layers.end && info.layers.end <= info.n_layer);
    FUZZ_REQUIRE(info.layers.begin == opts.layers.begin);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const auto file = GgufFile::open(fuzz::as_file(data, size));
        auto map = ModelMap::build(*file, MapSelection{});
        const auto model = load_model(*file, *map);
        check_info(*model, *file, LoadOptions{});
        // The last block alone, as a pipeline stage would load it.
        LoadOptions last;
        last.layers.begin = model->info().n_layer - 1;
        check_info(*load_model(*file, *map, last), *file, last);
        check_tensor_values(*file, *map, MapSelection{}, 1);
    } catch (const Error&) {
    }
    return 0;
}

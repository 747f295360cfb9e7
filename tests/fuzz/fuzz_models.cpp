// Fuzz target for the model loaders: any bytes, as a GGUF file, go through
// the model map and load_model (every family the registry knows), then the
// --check-tensors scan; only ds4::Error may come out, never a crash, a
// sanitizer report or another exception. What loads must keep the loader's
// promises (a vocabulary, a width, a layer range inside the model). The
// seed corpus (tests/fuzz/corpus/fuzz_models) holds micro models of both
// families, so mutations start from files that load.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/check_tensors.h"
#include "models/family.h"

namespace {

using namespace ds4;

#define FUZZ_REQUIRE(cond)                                                        \
    do {                                                                          \
        if (!(cond)) {                                                            \
            std::fprintf(stderr, "fuzz_models: broken promise: %s\n", #cond);    \
            std::abort();                                                         \
        }                                                                         \
    } while (0)

// The input as a file: a model map needs a descriptor to map, so the bytes
// go into one anonymous memory file, opened by path like a file on disk
// (as synth/memory_file does for in-memory benchmark models).
std::string as_file(const uint8_t* data, size_t size) {
    static const int fd = [] {
        const int f = ::memfd_create("fuzz_models", MFD_CLOEXEC);
        if (f < 0) {
            std::perror("fuzz_models: memfd_create");
            std::abort();
        }
        return f;
    }();
    if (::ftruncate(fd, 0) != 0 || ::ftruncate(fd, static_cast<off_t>(size)) != 0 ||
        (size > 0 && ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))) {
        std::perror("fuzz_models: writing the memory file");
        std::abort();
    }
    return "/proc/self/fd/" + std::to_string(fd);
}

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
        const auto file = GgufFile::open(as_file(data, size));
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

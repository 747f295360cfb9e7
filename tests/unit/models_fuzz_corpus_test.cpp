// The model-loader fuzzer's seed corpus (tests/fuzz/corpus/fuzz_models):
// micro models of every family, small, that load today. A seed that stopped
// loading would leave the fuzzer mutating files rejected at the first
// check, so this test fails instead. The seeds are
//   ds4-gguf synth --arch qwen3moe --preset micro --no-tokenizer --type f16 --seed 1
//   ds4-gguf synth --arch deepseek4 --preset micro --no-tokenizer --n-layer 1 --seed 1
//   ds4-gguf synth --arch glm-dsa --preset micro --no-tokenizer --type f16 --seed 1
// (named *.seed: .gitignore keeps *.gguf out of git).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/family.h"

namespace ds4 {
namespace {

namespace fs = std::filesystem;

TEST(ModelsFuzzCorpus, EverySeedIsASmallModelThatLoads) {
    const fs::path dir = fs::path(DS4_SOURCE_DIR) / "tests/fuzz/corpus/fuzz_models";
    std::set<std::string> archs;
    for (const auto& e : fs::directory_iterator(dir)) {
        SCOPED_TRACE(e.path().string());
        EXPECT_LE(fs::file_size(e.path()), 16384u);
        const auto file = GgufFile::open(e.path().string());
        auto map = ModelMap::build(*file, MapSelection{});
        const auto model = load_model(*file, *map);
        archs.insert(model->info().arch);
    }
    for (const auto& arch : supported_architectures()) EXPECT_TRUE(archs.count(arch)) << "no seed of " << arch;
}

}  // namespace
}  // namespace ds4

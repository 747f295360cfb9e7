// What the generation tests (engine_generate_test, engine_scheduler_test)
// share: a model from llama.cpp's generator redrawn at realistic magnitudes,
// loaded whole on a 2-thread CPU backend, and llama.cpp's vocab-only Qwen2
// vocabulary to detokenize its output (the model's vocabulary is smaller,
// so every id it samples has text and none ends generation).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "oracle_harness.h"
#include "support/loaded_model.h"
#include "tokenizer/tokenizer.h"

namespace ds4::oracle {

struct GenerationFixture {
    TempDir dir;
    test::LoadedModel m;
    std::unique_ptr<Backend> cpu = make_cpu_backend(2);
    std::unique_ptr<GgufFile> vocab_file;
    std::unique_ptr<Tokenizer> tok;

    GenerationFixture(const std::string& arch, uint64_t seed) {
        const fs::path path = arch == "deepseek4" ? realistic_deepseek4(dir.path(), model_seed(seed))
                              : arch == "glm-dsa" ? realistic_glm_dsa(dir.path(), model_seed(seed))
                                                  : realistic_qwen3moe(dir.path(), model_seed(seed));
        m = test::load_whole_model(path.string());
        vocab_file = GgufFile::open(std::string(DS4_ORACLE_DIR) + "/llama.cpp/models/ggml-vocab-qwen2.gguf");
        tok = Tokenizer::from_gguf(*vocab_file);
    }
    int32_t V() const { return int32_t(m.model->info().n_vocab); }
};

}  // namespace ds4::oracle

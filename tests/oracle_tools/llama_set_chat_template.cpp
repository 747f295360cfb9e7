// llama_set_chat_template IN OUT (--template FILE | --remove): the same GGUF
// with tokenizer.chat_template replaced by FILE's bytes, or removed, written
// by ggml's own gguf API. Tests use it to give a synthesized model another
// template (one ds4 cannot render, a Qwen3 2507 one) or none (a base model).
#include "../oracle/oracle_gguf_rewrite.h"

#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>

namespace {

constexpr const char* kKey = "tokenizer.chat_template";

int usage(const char* argv0) {
    std::fprintf(stderr, "usage: %s IN.gguf OUT.gguf (--template FILE | --remove)\n", argv0);
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    const bool remove = argc == 4 && std::strcmp(argv[3], "--remove") == 0;
    const bool replace = argc == 5 && std::strcmp(argv[3], "--template") == 0;
    if (!remove && !replace) return usage(argv[0]);
    try {
        std::string text;
        if (replace) {
            std::ifstream f(argv[4], std::ios::binary);
            if (!f) throw std::runtime_error(std::string("cannot read template file ") + argv[4]);
            std::ostringstream ss;
            ss << f.rdbuf();
            text = ss.str();
        }
        ds4::oracle::gguf_rewrite(
            argv[1], argv[2], [](const ggml_tensor&) { return ds4::oracle::TensorAction::keep; },
            [&](gguf_context* meta) {
                if (remove) gguf_remove_key(meta, kKey);
                else gguf_set_val_str(meta, kKey, text.c_str());
            });
    } catch (const std::exception& e) {
        std::fprintf(stderr, "llama_set_chat_template: %s\n", e.what());
        return 1;
    }
    return 0;
}

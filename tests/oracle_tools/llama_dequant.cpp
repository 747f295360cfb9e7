// llama_dequant IN OUT: the same GGUF with every quantized (and F16/BF16)
// tensor converted to F32 by ggml's own type traits. Running llama.cpp on the
// result gives "llama.cpp on the same weights, without activation
// quantization", the reference for ds4 running the quantized file.
#include "../oracle/oracle_gguf_rewrite.h"

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s IN.gguf OUT.gguf\n", argv[0]);
        return 1;
    }
    try {
        const auto stats = ds4::oracle::gguf_rewrite(argv[1], argv[2], [](const ggml_tensor& t) {
            // Integer tensors (none in today's models) stay as they are.
            const bool is_float = t.type == GGML_TYPE_F16 || t.type == GGML_TYPE_BF16 ||
                                  ggml_is_quantized(t.type);
            return is_float ? ds4::oracle::TensorAction::to_f32 : ds4::oracle::TensorAction::keep;
        });
        std::fprintf(stderr, "llama_dequant: %lld tensors converted to F32, %lld kept\n",
                     static_cast<long long>(stats.converted), static_cast<long long>(stats.kept));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "llama_dequant: %s\n", e.what());
        return 1;
    }
    return 0;
}

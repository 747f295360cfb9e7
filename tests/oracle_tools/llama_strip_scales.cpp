// llama_strip_scales IN OUT: the same GGUF without the optional `.scale` /
// `.input_scale` tensors. test-llama-archs fills every optional tensor
// llama.cpp knows, published Qwen3 / DeepSeek / GLM files carry none of these,
// and llama.cpp applies them when present, so the stripped file is the one
// that looks like a real checkpoint.
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
            return ds4::oracle::is_optional_scale_tensor(t.name) ? ds4::oracle::TensorAction::drop
                                                                 : ds4::oracle::TensorAction::keep;
        });
        std::fprintf(stderr, "llama_strip_scales: %lld scale tensors removed, %lld kept\n",
                     static_cast<long long>(stats.dropped), static_cast<long long>(stats.kept));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "llama_strip_scales: %s\n", e.what());
        return 1;
    }
    return 0;
}

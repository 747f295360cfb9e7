// llama.cpp's own tokenizer (libllama, vocab-only load) as the reference for
// ds4's Tokenizer.
#pragma once

#include <llama.h>
#include <ggml-backend.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ds4::test {

class LlamaVocab {
public:
    explicit LlamaVocab(const std::string& path) {
        static const bool init = [] {
            llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
            ggml_backend_load_all_from_path(DS4_ORACLE_LIBDIR);
            llama_backend_init();
            return true;
        }();
        (void)init;
        llama_model_params mp = llama_model_default_params();
        mp.vocab_only = true;
        model_ = llama_model_load_from_file(path.c_str(), mp);
        if (!model_) throw std::runtime_error("llama.cpp could not load " + path);
        vocab_ = llama_model_get_vocab(model_);
    }
    ~LlamaVocab() { llama_model_free(model_); }
    LlamaVocab(const LlamaVocab&) = delete;
    LlamaVocab& operator=(const LlamaVocab&) = delete;

    const llama_vocab* vocab() const { return vocab_; }

    std::vector<int32_t> tokenize(const std::string& text, bool parse_special) const {
        std::vector<llama_token> out(text.size() + 8);
        int n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), out.data(),
                               static_cast<int32_t>(out.size()), false, parse_special);
        if (n < 0) {
            out.resize(-n);
            n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), out.data(),
                               static_cast<int32_t>(out.size()), false, parse_special);
        }
        out.resize(n);
        return {out.begin(), out.end()};
    }

private:
    llama_model* model_ = nullptr;
    const llama_vocab* vocab_ = nullptr;
};

inline std::string escape_for_message(const std::string& s) {
    std::string o;
    for (unsigned char c : s) {
        if (c == '\n') o += "\\n";
        else if (c == '\r') o += "\\r";
        else if (c == '\t') o += "\\t";
        else if (c < 0x20 || c == 0x7F) { char b[8]; snprintf(b, sizeof b, "\\x%02x", c); o += b; }
        else o += static_cast<char>(c);
    }
    return o;
}

}  // namespace ds4::test

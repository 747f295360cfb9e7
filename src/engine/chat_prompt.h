// From a conversation to the prompt's token ids, as the ds4 program feeds
// them: which chat template renders the model's conversations (the one its
// GGUF names, or the one asked for), then the tokenizer with BOS. One place,
// so the program and the end-to-end oracle test run the same code.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat.h"

namespace ds4 {

class GgufFile;
class Tokenizer;

struct ChatTemplateChoice {
    std::string name;     // one of chat_template_names(), or kRawChat
    std::string warning;  // one line for stderr, or "" when the choice needs none
};

// `requested` is --chat-template ("" = not given). Without it the model's
// tokenizer.chat_template decides: a template ds4 renders is used; no
// template at all (a base model) is raw with a warning; a template ds4
// cannot render throws ds4::Error naming the file, quoting the start of the
// template and listing what ds4 renders, since feeding the bare text to a
// chat model would silently produce nonsense.
ChatTemplateChoice choose_chat_template(const GgufFile& file, std::string_view requested);

// BOS (when the vocabulary adds one) followed by the text's tokens, with
// special tokens written in the text parsed: llama_tokenize(vocab, text,
// add_special=true, parse_special=true).
std::vector<int32_t> prompt_token_ids(const Tokenizer& tokenizer, std::string_view text);

}  // namespace ds4

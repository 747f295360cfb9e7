#include "engine/chat_prompt.h"

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace ds4 {

namespace {

// The first line of a Jinja source, shortened, with control bytes shown as
// escapes, so an error message stays one printable line.
std::string template_excerpt(std::string_view source) {
    constexpr size_t kMaxBytes = 72;
    std::string_view line = source.substr(0, source.find('\n'));
    const bool cut = line.size() > kMaxBytes || line.size() < source.size();
    if (line.size() > kMaxBytes) {
        line = line.substr(0, kMaxBytes);
        // Do not end inside a UTF-8 sequence.
        while (!line.empty() && (static_cast<unsigned char>(line.back()) & 0xC0) == 0x80) line.remove_suffix(1);
        if (!line.empty() && static_cast<unsigned char>(line.back()) >= 0xC0) line.remove_suffix(1);
    }
    std::string out;
    for (char c : line) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
            static const char kHex[] = "0123456789abcdef";
            out += "\\x";
            out += kHex[(static_cast<unsigned char>(c) >> 4) & 0xF];
            out += kHex[static_cast<unsigned char>(c) & 0xF];
        } else {
            out += c;
        }
    }
    return cut ? out + "..." : out;
}

bool is_known(std::string_view name) {
    if (name == kRawChat) return true;
    for (const std::string& known : chat_template_names())
        if (name == known) return true;
    return false;
}

}  // namespace

ChatTemplateChoice choose_chat_template(const GgufFile& file, std::string_view requested) {
    const std::optional<std::string> source = file.get_string("tokenizer.chat_template");
    const std::string detected = source ? detect_chat_template(*source) : std::string();
    if (!requested.empty()) {
        if (!is_known(requested))  // parse_ds4_options checks this; callers from elsewhere may not
            throw Error("unknown chat template \"" + std::string(requested) + "\"; ds4 renders " +
                        chat_template_list() + " (or " + std::string(kRawChat) + ").");
        if (requested == kRawChat)
            return {std::string(kRawChat),
                    "--chat-template raw: the prompt text is sent as is, without a chat template."};
        if (!detected.empty() && detected != requested)
            return {std::string(requested), "--chat-template " + std::string(requested) +
                                                " replaces the model's own template (" + detected + ")."};
        return {std::string(requested), ""};
    }
    if (!source)
        return {std::string(kRawChat), file.path() +
                                           " has no chat template (tokenizer.chat_template), as base models do; "
                                           "the prompt text is sent as is."};
    if (detected.empty())
        throw Error(file.path() + " has a chat template ds4 cannot render (it begins \"" + template_excerpt(*source) +
                    "\"); ds4 renders " + chat_template_list() +
                    "; pass --chat-template NAME to use one of those, or --chat-template raw to send the text as is.");
    return {detected, ""};
}

std::vector<int32_t> prompt_token_ids(const Tokenizer& tokenizer, std::string_view text) {
    std::vector<int32_t> ids;
    if (tokenizer.add_bos() && tokenizer.bos() >= 0) ids.push_back(tokenizer.bos());
    const std::vector<int32_t> body = tokenizer.encode(text, /*parse_special=*/true);
    ids.insert(ids.end(), body.begin(), body.end());
    return ids;
}

}  // namespace ds4

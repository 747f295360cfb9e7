#include "engine/detokenizer.h"

#include <span>

#include "tokenizer/tokenizer.h"

namespace ds4 {

size_t complete_utf8_prefix(const std::string& text) {
    // Walk back over at most 3 continuation bytes to the lead byte of the
    // last sequence; cut there when the sequence needs more bytes than it has.
    for (size_t back = 1; back <= 4 && back <= text.size(); ++back) {
        const auto c = static_cast<unsigned char>(text[text.size() - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte
        const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? text.size() - back : text.size();
    }
    return text.size();  // four or more continuation bytes: not a prefix of anything valid, pass it on
}

std::string Detokenizer::push(int32_t token) {
    pending_ += tokenizer_.decode(std::span<const int32_t>(&token, 1));
    const size_t cut = complete_utf8_prefix(pending_);
    std::string out = pending_.substr(0, cut);
    pending_.erase(0, cut);
    return out;
}

std::string Detokenizer::flush() {
    std::string out;
    out.swap(pending_);
    return out;
}

}  // namespace ds4

#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "common/error.h"

namespace ds4 {

Normalization normalization_for_pre(const std::string& pre) {
    // Qwen's tokenizer.json files up to Qwen3 have "normalizer": {"type":
    // "NFC"} (the Qwen3 one the HF oracle test loads; transformers'
    // Qwen2Converter writes it for Qwen1.5 on, whose GGUFs llama.cpp names
    // "qwen2"). Not "qwen35": llama.cpp's Qwen3.5 vectors, made with its
    // Hugging Face tokenizer, keep a decomposed "e\u0301" as 'e' + U+0301
    // (that pre-tokenizer joins marks to letters instead). DeepSeek V3's
    // normalizer is an empty Sequence, and the other names sharing Qwen's
    // regex ("deepseek-r1-qwen", "stablelm2", ...) are other vendors'
    // tokenizers, not assumed to normalize.
    if (pre == "qwen2") return Normalization::NFC;
    return Normalization::NONE;
}

namespace {

void append_nfc(std::string& out, std::string_view run) {
    // Every code point below U+0300 (UTF-8 lead bytes below 0xCC) is NFC
    // and never composes with its neighbour: such a run is already NFC.
    bool plain = true;
    for (char c : run) plain = plain && static_cast<uint8_t>(c) < 0xCC;
    if (plain) {
        out += run;
        return;
    }
    utf8proc_uint8_t* buf = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()),
                                            static_cast<utf8proc_ssize_t>(run.size()), &buf,
                                            static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (n < 0) throw Error(std::string("NFC normalization failed: ") + utf8proc_errmsg(n) + ".");
    out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
    std::free(buf);
}

}  // namespace

std::string nfc(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
    const size_t n = text.size();
    size_t run = 0, i = 0;
    while (i < n) {
        utf8proc_int32_t cp = 0;
        const utf8proc_ssize_t len = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(n - i), &cp);
        if (len > 0) {
            i += static_cast<size_t>(len);
            continue;
        }
        append_nfc(out, text.substr(run, i - run));
        out += text[i];  // malformed (utf8proc rejects overlong forms and surrogates too)
        run = ++i;
    }
    append_nfc(out, text.substr(run));
    return out;
}

}  // namespace ds4

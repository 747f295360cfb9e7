#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <map>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/bpe.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode_text.h"

namespace ds4 {

namespace {

// llama.cpp's token attribute bits (llama.h LLAMA_TOKEN_ATTR_*).
enum : uint16_t {
    kAttrUnknown = 1 << 0, kAttrUnused = 1 << 1, kAttrNormal = 1 << 2, kAttrControl = 1 << 3,
    kAttrUserDefined = 1 << 4, kAttrByte = 1 << 5,
};

uint16_t attr_of_type(int64_t type) {
    switch (type) {
        case 1: return kAttrNormal;
        case 2: return kAttrUnknown;
        case 3: return kAttrControl;
        case 4: return kAttrUserDefined;
        case 5: return kAttrUnused;
        case 6: return kAttrByte;
        default: return 0;
    }
}

class Metadata {
public:
    Metadata(const std::vector<std::pair<std::string, GgufValue>>& kv, const std::string& source) : source_(source) {
        for (const auto& [k, v] : kv) map_[k] = &v;
    }
    const GgufValue* find(const std::string& key) const {
        auto it = map_.find(key);
        return it == map_.end() ? nullptr : it->second;
    }
    std::string string(const std::string& key, bool required) const {
        const GgufValue* v = find(key);
        if (!v) {
            if (required) throw Error(source_ + " lacks metadata key " + key + ".");
            return {};
        }
        if (v->type != GgufValueType::STRING) throw Error(source_ + ": metadata key " + key + " is not a string.");
        return v->str;
    }
    const GgufValue* array(const std::string& key, GgufValueType elem, bool required) const {
        const GgufValue* v = find(key);
        if (!v) {
            if (required) throw Error(source_ + " lacks metadata key " + key + ".");
            return nullptr;
        }
        const bool elem_ok = v->type == GgufValueType::ARRAY &&
                             (v->elem_type == elem || (elem != GgufValueType::STRING && v->elem_type != GgufValueType::STRING &&
                                                       gguf_value_type_is_integer(v->elem_type) && gguf_value_type_is_integer(elem)));
        if (!elem_ok) throw Error(source_ + ": metadata key " + key + " is not an array of " + gguf_value_type_name(elem) + ".");
        return v;
    }
    // An id key; -1 when absent or outside the vocabulary (llama.cpp ignores those too).
    int32_t id(const std::string& key, int32_t n_vocab) const {
        const GgufValue* v = find(key);
        if (!v) return -1;
        if (!gguf_value_type_is_integer(v->type) || v->type == GgufValueType::BOOL)
            throw Error(source_ + ": metadata key " + key + " is not an integer.");
        return (v->i >= 0 && v->i < n_vocab) ? static_cast<int32_t>(v->i) : -1;
    }
    std::optional<bool> boolean(const std::string& key) const {
        const GgufValue* v = find(key);
        if (!v) return std::nullopt;
        if (v->type != GgufValueType::BOOL) throw Error(source_ + ": metadata key " + key + " is not a bool.");
        return v->i != 0;
    }

private:
    std::string source_;
    std::map<std::string, const GgufValue*> map_;
};

bool is_one_of(const std::string& s, std::initializer_list<const char*> list) {
    for (const char* x : list)
        if (s == x) return true;
    return false;
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
    return from_metadata(file.metadata(), file.path().empty() ? std::string("GGUF file") : "file " + file.path());
}

std::unique_ptr<Tokenizer> Tokenizer::from_metadata(const std::vector<std::pair<std::string, GgufValue>>& kv,
                                                    const std::string& source) {
    const Metadata md(kv, source);
    const std::string model = md.string("tokenizer.ggml.model", true);
    if (model != "gpt2")
        throw Error(source + " has tokenizer model '" + model +
                    "', but ds4 reads only byte-level BPE vocabularies (tokenizer.ggml.model = \"gpt2\").");
    std::unique_ptr<Tokenizer> t(new Tokenizer());
    const std::string pre = md.string("tokenizer.ggml.pre", false);
    t->pretokenizer_ = std::make_unique<Pretokenizer>(pre);
    t->normalization_ = normalization_for_pre(pre);

    const GgufValue* tokens = md.array("tokenizer.ggml.tokens", GgufValueType::STRING, true);
    const size_t n = tokens->strings.size();
    if (n == 0 || n > static_cast<size_t>(INT32_MAX)) throw Error(source + " has an empty or oversized token list.");
    const GgufValue* types = md.array("tokenizer.ggml.token_type", GgufValueType::I32, false);
    if (types && types->ints.size() < n)
        throw Error(source + " has " + std::to_string(types->ints.size()) + " token types for " + std::to_string(n) + " tokens.");
    const GgufValue* merges = md.array("tokenizer.ggml.merges", GgufValueType::STRING, true);

    t->tokens_.resize(n);
    t->attr_.resize(n);
    t->token_to_id_.reserve(n * 2);
    for (size_t i = 0; i < n; ++i) {
        std::string word = tokens->strings[i];
        if (word.empty()) word = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp names them
        t->token_to_id_[word] = static_cast<int32_t>(i);                // a later duplicate wins, as in llama.cpp
        t->tokens_[i] = std::move(word);
        t->attr_[i] = types ? attr_of_type(types->ints[i]) : static_cast<uint16_t>(kAttrNormal);
    }
    const auto nv = static_cast<int32_t>(n);
    t->bos_ = md.id("tokenizer.ggml.bos_token_id", nv);
    t->eos_ = md.id("tokenizer.ggml.eos_token_id", nv);
    t->add_bos_ = md.boolean("tokenizer.ggml.add_bos_token").value_or(t->pretokenizer_->add_bos_default());

    // End-of-generation set, following llama.cpp's llama_vocab::impl::load:
    // ids from the metadata, then tokens recognised by their text (which
    // llama.cpp also promotes to control tokens, so they are parsed as special).
    int32_t eot = md.id("tokenizer.ggml.eot_token_id", nv);
    int32_t eom = md.id("tokenizer.ggml.eom_token_id", nv);
    int32_t fim_pad = md.id("tokenizer.ggml.fim_pad_token_id", nv);
    int32_t fim_rep = md.id("tokenizer.ggml.fim_rep_token_id", nv);
    int32_t fim_sep = md.id("tokenizer.ggml.fim_sep_token_id", nv);
    int32_t fim_pre = md.id("tokenizer.ggml.fim_pre_token_id", nv);
    int32_t fim_suf = md.id("tokenizer.ggml.fim_suf_token_id", nv);
    int32_t fim_mid = md.id("tokenizer.ggml.fim_mid_token_id", nv);
    if (fim_pre < 0) fim_pre = md.id("tokenizer.ggml.prefix_token_id", nv);
    if (fim_suf < 0) fim_suf = md.id("tokenizer.ggml.suffix_token_id", nv);
    if (fim_mid < 0) fim_mid = md.id("tokenizer.ggml.middle_token_id", nv);
    auto detect = [&](int32_t& slot, std::initializer_list<const char*> texts) {
        if (slot >= 0) return;
        for (int32_t i = 0; i < nv; ++i) {
            if (is_one_of(t->tokens_[i], texts) && t->token_to_id_[t->tokens_[i]] == i) {
                slot = i;
                t->attr_[i] |= kAttrControl;
                return;
            }
        }
    };
    detect(eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
                 "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"});
    detect(eom, {"<|eom_id|>"});
    detect(fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"});
    detect(fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"});
    detect(fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"});
    detect(fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"});
    detect(fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
    detect(fim_sep, {"<|file_sep|>"});

    std::vector<int32_t> eog;
    for (int32_t id : {fim_pad, fim_rep, fim_sep})
        if (id >= 0) eog.push_back(id);
    for (int32_t i = 0; i < nv; ++i) {
        const std::string& s = t->tokens_[i];
        if (t->token_to_id_[s] != i) continue;  // llama.cpp walks its text -> id map
        if (is_one_of(s, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
                          "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
                          "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
                          "<｜end▁of▁sentence｜>", "[e~["})) {
            eog.push_back(i);
            t->attr_[i] |= kAttrControl;
        }
        // gpt-oss: these are rendered as text, never treated as control.
        if (is_one_of(s, {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})) t->attr_[i] = kAttrUserDefined;
    }
    for (int32_t id : {t->eos_, eot, eom})
        if (id >= 0) eog.push_back(id);
    std::sort(eog.begin(), eog.end());
    eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
    auto has_text = [&](const char* s) {
        return std::any_of(eog.begin(), eog.end(), [&](int32_t id) { return t->tokens_[id] == s; });
    };
    auto drop_text = [&](const char* s, uint16_t new_attr) {
        for (auto it = eog.begin(); it != eog.end(); ++it)
            if (t->tokens_[*it] == s) {
                t->attr_[*it] = new_attr;
                eog.erase(it);
                return;
            }
    };
    // o200k_harmony and solar-open: "<|end|>" ends a message, not generation.
    if (has_text("<|end|>") && ((has_text("<|return|>") && has_text("<|call|>")) ||
                                ((has_text("<|call|>") || has_text("<|calls|>")) && has_text("<|flush|>"))))
        drop_text("<|end|>", kAttrUserDefined);
    if (has_text("<|tool_response>") && has_text("</s>")) drop_text("</s>", kAttrNormal);
    t->eog_ = std::move(eog);

    // Tokens cut out of the text before pre-tokenization, longest first.
    for (int32_t i = 0; i < nv; ++i)
        if (t->attr_[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) t->special_tokens_.push_back(i);
    std::stable_sort(t->special_tokens_.begin(), t->special_tokens_.end(),
                     [&](int32_t a, int32_t b) { return t->tokens_[a].size() > t->tokens_[b].size(); });

    t->pieces_.resize(n);
    for (size_t i = 0; i < n; ++i) {
        const uint16_t a = t->attr_[i];
        const std::string& s = t->tokens_[i];
        if (a & (kAttrUnknown | kAttrControl | kAttrUserDefined)) {
            t->pieces_[i] = s;
        } else if (a & kAttrNormal) {
            t->pieces_[i] = byte_level_decode(s);
        } else if (a & kAttrByte) {
            if (s.size() == 6 && s.rfind("<0x", 0) == 0 && s[5] == '>') {
                t->pieces_[i] = std::string(1, static_cast<char>(std::stoi(s.substr(3, 2), nullptr, 16)));
            } else {
                t->pieces_[i] = byte_level_decode(s);
            }
        }  // unused and undefined tokens decode to nothing, as in llama.cpp
    }

    t->bpe_ = std::make_unique<BpeMerges>(t->tokens_, t->token_to_id_, merges->strings);
    return t;
}

const std::string& Tokenizer::pre() const { return pretokenizer_->name(); }

TokenType Tokenizer::token_type(int32_t id) const {
    if (id < 0 || id >= n_vocab()) throw Error("token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(n_vocab()) + " tokens.");
    const uint16_t a = attr_[id];
    if (a & kAttrControl) return TokenType::CONTROL;
    if (a & kAttrUserDefined) return TokenType::USER_DEFINED;
    if (a & kAttrUnknown) return TokenType::UNKNOWN;
    if (a & kAttrByte) return TokenType::BYTE;
    if (a & kAttrUnused) return TokenType::UNUSED;
    if (a & kAttrNormal) return TokenType::NORMAL;
    return TokenType::UNDEFINED;
}

bool Tokenizer::is_eog(int32_t id) const { return std::binary_search(eog_.begin(), eog_.end(), id); }

int32_t Tokenizer::token_id(std::string_view piece) const {
    auto it = token_to_id_.find(std::string(piece));
    return it == token_to_id_.end() ? -1 : it->second;
}

std::string Tokenizer::token_piece(int32_t id) const {
    if (id < 0 || id >= n_vocab()) throw Error("token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(n_vocab()) + " tokens.");
    return pieces_[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
    std::string out;
    for (int32_t id : ids) {
        if (id < 0 || id >= n_vocab()) throw Error("token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(n_vocab()) + " tokens.");
        out += pieces_[id];
    }
    return out;
}

void Tokenizer::tokenize_text(std::string_view text, std::vector<int32_t>& out) const {
    for (const std::string& word : pretokenizer_->split(text)) {
        if (pretokenizer_->ignore_merges()) {
            auto it = token_to_id_.find(byte_level_encode(word));
            if (it != token_to_id_.end()) {
                out.push_back(it->second);
                continue;
            }
        }
        bpe_->encode_word(word, out);
    }
}

std::vector<Tokenizer::Fragment> Tokenizer::partition(std::string_view text, bool parse_special) const {
    // Fragments of raw text and of special tokens, split token by token in
    // the order of special_tokens_, exactly like llama.cpp's
    // tokenizer_st_partition (so overlapping specials resolve the same way).
    // Hugging Face also cuts its added tokens out before normalizing, so a
    // combining mark after "<think>" never composes with its '>'.
    std::vector<Fragment> frags, next;
    if (!text.empty()) frags.push_back({-1, 0, text.size()});
    for (int32_t id : special_tokens_) {
        if (!parse_special && (attr_[id] & (kAttrControl | kAttrUnknown))) continue;
        const std::string& tok = tokens_[id];
        if (text.find(tok) == std::string_view::npos) continue;
        next.clear();
        for (const Fragment& f : frags) {
            if (f.token >= 0) {
                next.push_back(f);
                continue;
            }
            size_t off = f.off, end = f.off + f.len;
            while (off < end) {
                const size_t m = text.substr(0, end).find(tok, off);
                if (m == std::string_view::npos) break;
                if (m > off) next.push_back({-1, off, m - off});
                next.push_back({id, 0, 0});
                off = m + tok.size();
            }
            if (off < end) next.push_back({-1, off, end - off});
        }
        frags.swap(next);
    }
    return frags;
}

std::string Tokenizer::normalize_fragment(std::string_view text) const {
    return normalization_ == Normalization::NFC ? nfc(text) : std::string(text);
}

std::string Tokenizer::normalize(std::string_view text, bool parse_special) const {
    std::string out;
    out.reserve(text.size());
    for (const Fragment& f : partition(text, parse_special)) {
        if (f.token >= 0) {
            out += tokens_[f.token];
        } else {
            out += normalize_fragment(text.substr(f.off, f.len));
        }
    }
    return out;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    for (const Fragment& f : partition(text, parse_special)) {
        if (f.token >= 0) {
            out.push_back(f.token);
        } else {
            tokenize_text(normalize_fragment(text.substr(f.off, f.len)), out);
        }
    }
    return out;
}

}  // namespace ds4

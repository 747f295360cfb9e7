#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "common/error.h"
#include "tokenizer/unicode_text.h"

namespace ds4 {

namespace {

// The patterns below are llama.cpp's (llama-vocab.cpp, llm_tokenizer_bpe),
// with every non-ASCII character written as \x{HEX}: the originals contain
// code points such as U+1F7D that text tools silently NFC-normalize into
// others (U+03CE), which turns a valid range into an out-of-order one.
const std::string kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const std::string kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const std::string kQwen35 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const std::string kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const std::vector<std::string> kDeepseekLlm = {
    "[\r\n]",
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
    "\\s+$",
    "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
    "\\p{N}+",
};
const std::vector<std::string> kDeepseekV3 = {
    "\\p{N}{1,3}",
    "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};
const std::vector<std::string> kDeepseekCoder = {
    "[\r\n]",
    "\\s?\\p{L}+",
    "\\s?\\p{P}+",
    "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
    "\\p{N}",
};
const std::vector<std::string> kDefault = {
    "[\\p{P}\\$\\+<=>\\^~\\|]+",
    kGpt2,
    "\\p{N}+",
    "[0-9][0-9][0-9]",
};

struct Spec {
    std::vector<std::string> names;
    std::vector<std::string> regexes;
    bool ignore_merges = false;
    bool add_bos = false;
};

const std::vector<Spec>& specs() {
    static const std::vector<Spec> s = {
        {{"default"}, kDefault, false, false},
        {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
         {kLlama3}, true, true},
        {{"dbrx", "smaug-bpe", "glm4", "chatglm-bpe"}, {kLlama3}, false, false},
        {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open"},
         {kQwen2}, false, false},
        {{"qwen35"}, {kQwen35}, false, false},
        {{"deepseek-llm"}, kDeepseekLlm, false, false},
        {{"deepseek-coder"}, kDeepseekCoder, false, false},
        {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"}, kDeepseekV3, false, false},
        {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
          "modern-bert", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4"},
         {kGpt2}, false, false},
        {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"},
         {"\\p{N}", kGpt2}, false, false},
    };
    return s;
}

// llama.cpp's \s is the Unicode White_Space set (unicode-data.cpp); PCRE2's
// \s in UCP mode differs (U+0085, and it varies across PCRE2 versions), so
// \s and \S are spelled out as this class.
const char* kWhiteSpaceMembers =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

std::string translate_whitespace(const std::string& re) {
    std::string out;
    bool in_class = false;
    for (size_t i = 0; i < re.size(); ++i) {
        const char c = re[i];
        if (c == '\\' && i + 1 < re.size()) {
            const char e = re[i + 1];
            if (e == 's') {
                out += in_class ? std::string(kWhiteSpaceMembers) : "[" + std::string(kWhiteSpaceMembers) + "]";
            } else if (e == 'S') {
                if (in_class) throw Error("pre-tokenizer pattern uses \\S inside a character class, which ds4 cannot translate.");
                out += "[^" + std::string(kWhiteSpaceMembers) + "]";
            } else {
                out += c;
                out += e;
            }
            ++i;
            continue;
        }
        if (c == '[' && !in_class) in_class = true;
        else if (c == ']' && in_class) in_class = false;
        out += c;
    }
    return out;
}

}  // namespace

struct PretokenizerRegex {
    pcre2_code* code = nullptr;
    bool jit = false;
    ~PretokenizerRegex() { pcre2_code_free(code); }
};

namespace {

// Per-thread match state: match data and a JIT stack large enough for long
// runs (a 100 KB line of letters is one match).
struct MatchState {
    pcre2_match_data* md = nullptr;
    pcre2_match_context* mctx = nullptr;
    pcre2_jit_stack* stack = nullptr;
    MatchState() {
        md = pcre2_match_data_create(4, nullptr);
        mctx = pcre2_match_context_create(nullptr);
        stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
        if (stack) pcre2_jit_stack_assign(mctx, nullptr, stack);
    }
    ~MatchState() {
        pcre2_match_data_free(md);
        pcre2_match_context_free(mctx);
        pcre2_jit_stack_free(stack);
    }
};

MatchState& match_state() {
    thread_local MatchState s;
    return s;
}

}  // namespace

std::vector<std::string> Pretokenizer::known_names() {
    std::vector<std::string> n;
    for (const auto& s : specs()) n.insert(n.end(), s.names.begin(), s.names.end());
    return n;
}

Pretokenizer::Pretokenizer(const std::string& pre) : name_(pre.empty() ? "default" : pre) {
    const Spec* spec = nullptr;
    for (const auto& s : specs()) {
        if (std::find(s.names.begin(), s.names.end(), name_) != s.names.end()) spec = &s;
    }
    if (!spec) throw Error("tokenizer pre-tokenizer '" + name_ + "' is not supported by ds4.");
    ignore_merges_ = spec->ignore_merges;
    add_bos_default_ = spec->add_bos;
    for (const auto& re : spec->regexes) {
        const std::string pattern = translate_whitespace(re);
        int err = 0;
        PCRE2_SIZE err_off = 0;
        auto r = std::make_unique<PretokenizerRegex>();
        // DOLLAR_ENDONLY: deepseek-llm's "\s+$" means the end of the piece,
        // as in std::regex (ECMAScript), not "before a final newline".
        r->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off, nullptr);
        if (!r->code) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof(msg));
            throw Error("pre-tokenizer '" + name_ + "' pattern does not compile at offset " + std::to_string(err_off) +
                        ": " + reinterpret_cast<const char*>(msg) + ".");
        }
        r->jit = pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE) == 0;
        regexes_.push_back(std::move(r));
    }
}

Pretokenizer::~Pretokenizer() = default;

std::vector<std::string> Pretokenizer::split(std::string_view text) const {
    const std::vector<uint32_t> cpts = utf8_decode_lenient(text);
    // The subject PCRE2 sees: valid UTF-8, one character per code point.
    // As in llama.cpp, non-ASCII white space is matched as U+000B (so a
    // pattern's literal U+3000 never matches the ideographic space), and code
    // points PCRE2 rejects (surrogates) become U+FFFF, which belongs to no
    // class the patterns use. Words are cut from the repaired text.
    std::string subject;
    std::string repaired;
    subject.reserve(text.size());
    repaired.reserve(text.size());
    std::vector<uint32_t> repaired_at(1, 0);  // by subject byte offset: repaired byte offset
    repaired_at.reserve(text.size() + 1);
    for (const uint32_t cp : cpts) {
        utf8_append(repaired, cp);
        const bool wide_space = cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
                                cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
        utf8_append(subject, wide_space ? 0x0B : (cp >= 0xD800 && cp <= 0xDFFF) ? 0xFFFF : cp);
        repaired_at.resize(subject.size() + 1, 0);
        repaired_at[subject.size()] = static_cast<uint32_t>(repaired.size());
    }

    // Pieces as byte ranges; each pattern splits every piece further into
    // its matches and the gaps between them (llama.cpp's unicode_regex_split).
    std::vector<std::pair<size_t, size_t>> pieces;
    if (!subject.empty()) pieces.emplace_back(0, subject.size());
    MatchState& ms = match_state();
    std::vector<std::pair<size_t, size_t>> next;
    for (const auto& re : regexes_) {
        next.clear();
        next.reserve(pieces.size() * 2);
        for (const auto& [begin, end] : pieces) {
            const auto* base = reinterpret_cast<PCRE2_SPTR>(subject.data() + begin);
            const size_t len = end - begin;
            size_t pos = 0, emitted = 0;
            while (pos < len) {
                const int rc = pcre2_match(re->code, base, len, pos, PCRE2_NO_UTF_CHECK, ms.md, ms.mctx);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) {
                    PCRE2_UCHAR msg[256];
                    pcre2_get_error_message(rc, msg, sizeof(msg));
                    throw Error("pre-tokenizer '" + name_ + "' failed on a text of " + std::to_string(text.size()) +
                                " bytes: " + reinterpret_cast<const char*>(msg) + ".");
                }
                const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(ms.md);
                const size_t ms_begin = ov[0], ms_end = ov[1];
                if (ms_end == ms_begin) {  // empty match: step over one character
                    pos = ms_begin + 1;
                    while (pos < len && (static_cast<uint8_t>(subject[begin + pos]) & 0xC0) == 0x80) ++pos;
                    continue;
                }
                if (ms_begin > emitted) next.emplace_back(begin + emitted, begin + ms_begin);
                next.emplace_back(begin + ms_begin, begin + ms_end);
                emitted = pos = ms_end;
            }
            if (emitted < len) next.emplace_back(begin + emitted, end);
        }
        pieces.swap(next);
    }

    std::vector<std::string> words;
    words.reserve(pieces.size());
    for (const auto& [b, e] : pieces) words.emplace_back(repaired.substr(repaired_at[b], repaired_at[e] - repaired_at[b]));
    return words;
}

}  // namespace ds4

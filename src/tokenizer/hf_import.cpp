#include "tokenizer/hf_import.h"

#include <map>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace ds4 {

namespace {

using nlohmann::json;

json parse(const std::string& text, const char* what) {
    try {
        return json::parse(text);
    } catch (const json::exception& e) {
        throw Error(std::string(what) + " is not valid JSON: " + e.what() + ".");
    }
}

// convert_hf_to_gguf.py's does_token_look_special.
bool looks_special(const std::string& t) {
    auto starts = [&](const std::string& p) { return t.rfind(p, 0) == 0; };
    auto ends = [&](const std::string& s) { return t.size() >= s.size() && t.compare(t.size() - s.size(), s.size(), s) == 0; };
    if (t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]") return true;
    if (starts("<|") && ends("|>")) return true;
    if (starts("<｜") && ends("｜>")) return true;
    return starts("<unused") && ends(">");
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
    return s;
}

}  // namespace

std::vector<std::pair<std::string, GgufValue>> hf_tokenizer_to_gguf(const std::string& tokenizer_json,
                                                                    const std::string& tokenizer_config_json,
                                                                    const std::string& pre, int64_t vocab_size) {
    const json tok = parse(tokenizer_json, "tokenizer.json");
    const json cfg = tokenizer_config_json.empty() ? json::object() : parse(tokenizer_config_json, "tokenizer_config.json");
    if (!tok.is_object() || !tok.contains("model") || !tok["model"].is_object())
        throw Error("tokenizer.json has no \"model\" object.");
    const json& model = tok["model"];
    const std::string type = model.value("type", "");
    if (type != "BPE") throw Error("tokenizer.json has a '" + type + "' model, but only BPE models can be imported.");
    if (!model.contains("vocab") || !model["vocab"].is_object()) throw Error("tokenizer.json has no BPE vocab.");

    // id -> text: the BPE vocab, then added tokens (HF's tokenizer.vocab).
    std::map<int64_t, std::string> by_id;
    for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
        if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0)
            throw Error("tokenizer.json vocab entry '" + it.key() + "' has no valid id.");
        by_id[it.value().get<int64_t>()] = it.key();
    }
    struct Added {
        std::string content;
        bool special;
    };
    std::map<int64_t, Added> added;
    const json added_tokens = tok.value("added_tokens", json::array());
    for (const json& a : added_tokens) {
        if (!a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") || !a["content"].is_string())
            throw Error("tokenizer.json has an added token without id or content.");
        const int64_t id = a["id"].get<int64_t>();
        if (id < 0) throw Error("tokenizer.json has an added token with a negative id.");
        added[id] = {a["content"].get<std::string>(), a.value("special", false)};
        by_id[id] = a["content"].get<std::string>();
    }
    if (by_id.empty()) throw Error("tokenizer.json has an empty vocabulary.");
    const int64_t n = std::max<int64_t>(by_id.rbegin()->first + 1, vocab_size);
    if (n > (int64_t{1} << 24)) throw Error("tokenizer.json has token ids beyond 16M, which is not a real vocabulary.");

    std::vector<std::string> tokens(n);
    std::vector<int64_t> types(n);
    for (int64_t i = 0; i < n; ++i) {
        auto it = by_id.find(i);
        if (it == by_id.end()) {
            tokens[i] = "[PAD" + std::to_string(i) + "]";
            types[i] = 5;  // UNUSED
            continue;
        }
        tokens[i] = it->second;
        auto ad = added.find(i);
        if (ad == added.end()) {
            types[i] = 1;  // NORMAL
        } else if (ad->second.special || looks_special(tokens[i])) {
            types[i] = 3;  // CONTROL
        } else {
            tokens[i] = replace_all(tokens[i], "\xe2\x96\x81", " ");  // pre-normalized user-defined spaces
            types[i] = 4;  // USER_DEFINED
        }
    }

    std::vector<std::string> merges;
    if (model.contains("merges") && model["merges"].is_array()) {
        for (const json& m : model["merges"]) {
            if (m.is_string()) {
                merges.push_back(m.get<std::string>());
            } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
                // Pair form (transformers >= 4.45): spaces inside a part are
                // written as U+0120 so "a b" stays splittable.
                merges.push_back(replace_all(m[0].get<std::string>(), " ", "\xc4\xa0") + " " +
                                 replace_all(m[1].get<std::string>(), " ", "\xc4\xa0"));
            } else {
                throw Error("tokenizer.json has merges in an unknown format.");
            }
        }
    }
    if (merges.empty()) throw Error("tokenizer.json has no BPE merges.");

    std::vector<std::pair<std::string, GgufValue>> kv;
    kv.emplace_back("tokenizer.ggml.model", GgufValue::string("gpt2"));
    kv.emplace_back("tokenizer.ggml.pre", GgufValue::string(pre));
    kv.emplace_back("tokenizer.ggml.tokens", GgufValue::string_array(std::move(tokens)));
    kv.emplace_back("tokenizer.ggml.token_type", GgufValue::int_array(GgufValueType::I32, std::move(types)));
    kv.emplace_back("tokenizer.ggml.merges", GgufValue::string_array(std::move(merges)));

    // SpecialVocab: <typ>_token in tokenizer_config.json (a string or an
    // AddedToken dict) names the first added token with that content.
    static const std::pair<const char*, const char*> kSpecial[] = {
        {"bos", "tokenizer.ggml.bos_token_id"},       {"eos", "tokenizer.ggml.eos_token_id"},
        {"unk", "tokenizer.ggml.unknown_token_id"},   {"sep", "tokenizer.ggml.seperator_token_id"},
        {"pad", "tokenizer.ggml.padding_token_id"},   {"mask", "tokenizer.ggml.mask_token_id"},
    };
    std::vector<std::pair<std::string, GgufValue>> add_flags;
    for (const auto& [typ, key] : kSpecial) {
        const std::string add_key = std::string("add_") + typ + "_token";
        if (cfg.contains(add_key) && cfg[add_key].is_boolean() &&
            (std::string(typ) == "bos" || std::string(typ) == "eos" || std::string(typ) == "sep"))
            add_flags.emplace_back("tokenizer.ggml." + add_key, GgufValue::boolean(cfg[add_key].get<bool>()));
        const std::string entry_key = std::string(typ) + "_token";
        if (!cfg.contains(entry_key)) continue;
        const json& e = cfg[entry_key];
        std::string content;
        if (e.is_string()) content = e.get<std::string>();
        else if (e.is_object() && e.contains("content") && e["content"].is_string()) content = e["content"].get<std::string>();
        else continue;
        for (const json& a : added_tokens) {
            if (a["content"] == content) {
                kv.emplace_back(key, GgufValue::u32(static_cast<uint32_t>(a["id"].get<int64_t>())));
                break;
            }
        }
    }
    for (auto& f : add_flags) kv.push_back(std::move(f));
    if (cfg.contains("chat_template") && cfg["chat_template"].is_string())
        kv.emplace_back("tokenizer.chat_template", GgufValue::string(cfg["chat_template"].get<std::string>()));
    return kv;
}

}  // namespace ds4

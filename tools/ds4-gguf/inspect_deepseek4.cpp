#include "inspect_deepseek4.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "inspect.h"

namespace ds4 {

namespace {

// Role of a tensor in the quant mix, by name. Norm gains come first, so
// "compressor" and "indexer" count only their matrices.
std::string role_of(const std::string& name) {
    auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
    auto ends = [&](const std::string& s) {
        return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    // Per-tensor multipliers of converted FP8/NVFP4 checkpoints (and of
    // llama.cpp's test-llama-archs files); the published files have none.
    if (ends(".scale") || ends(".input_scale")) return "weight scales";
    if (has("exp_probs_b_vl")) return "vision router bias";
    if (has("ffn_gate_exps")) return "routed gate";
    if (has("ffn_up_exps")) return "routed up";
    if (has("ffn_down_exps")) return "routed down";
    if (has("norm")) return "norms";
    if (has("_shexp")) return "shared expert";
    if (has("hc_")) return "hyper-connection";
    if (has("attn_compressor")) return "compressor";
    if (has("indexer")) return "indexer";
    if (has("attn_sinks")) return "attention sinks";
    if (has("attn_")) return "attention";
    if (has("ffn_gate_inp")) return "router";
    if (has("exp_probs_b")) return "router bias";
    if (has("ffn_gate_tid2eid")) return "hash routing";
    if (name == "token_embd.weight") return "embedding";
    if (name == "output.weight") return "output";
    return "other";
}

const std::vector<std::string>& role_order() {
    static const std::vector<std::string> order = {
        "routed gate", "routed up", "routed down", "attention", "shared expert", "output", "embedding",
        "router", "hyper-connection", "compressor", "indexer", "norms", "attention sinks", "router bias",
        "hash routing", "weight scales", "vision router bias", "other"};
    return order;
}

// A metadata integer, or nullopt when absent or not an integer.
std::optional<uint64_t> uint_key(const GgufFile& f, const std::string& key) {
    try {
        return f.get_uint(key);
    } catch (const Error&) {
        return std::nullopt;
    }
}

std::string attention_code(int64_t ratio) {
    if (ratio == 0) return "D";
    if (ratio == 4) return "C4";
    if (ratio == 128) return "C128";
    return "R" + std::to_string(ratio);  // not a kind llama.cpp accepts
}

}  // namespace

void inspect_deepseek4(const GgufFile& file, std::ostream& out) {
    const std::string a = "deepseek4.";
    const auto n_layer = uint_key(file, a + "block_count");
    const auto n_hash = uint_key(file, a + "hash_layer_count");
    const auto n_swa = uint_key(file, a + "attention.sliding_window");
    const auto top_k = uint_key(file, a + "attention.indexer.top_k");
    const auto n_hc = uint_key(file, a + "hyper_connection.count");
    const GgufValue* ratios = file.find(a + "attention.compress_ratios");
    auto text = [](const std::optional<uint64_t>& v) { return v ? std::to_string(*v) : std::string("?"); };

    out << "\ndeepseek4 layer schedule: " << text(n_layer) << " layers, sliding window " << text(n_swa)
        << ", indexer top-k " << text(top_k) << ", " << text(n_hash) << " hash-routed, " << text(n_hc)
        << " hyper-connection streams\n";
    if (!n_layer || !ratios || ratios->type != GgufValueType::ARRAY || ratios->ints.size() < *n_layer) {
        out << "  (no usable block_count / attention.compress_ratios: schedule unknown)\n";
    } else {
        out << "  attention: D dense sliding window, C4 ratio-4 compressed sparse + indexer, C128 ratio-128 "
               "heavily compressed\n"
            << "  moe:       h hash-routed (token id -> experts), s scored (sqrtsoftplus + bias)\n";
        const uint64_t L = *n_layer, H = n_hash.value_or(0);
        std::map<std::string, int> attn_count;
        int hash_count = 0;
        std::vector<std::string> warnings;
        constexpr uint64_t kPerLine = 10;
        for (uint64_t il = 0; il < L; ++il) {
            const int64_t ratio = ratios->ints[il];
            const std::string code = attention_code(ratio);
            const bool hash = il < H;
            ++attn_count[code];
            hash_count += hash;
            if (il % kPerLine == 0) {
                const uint64_t last = std::min(L, il + kPerLine) - 1;
                out << (il ? "\n" : "") << "  " << pad(std::to_string(il) + "-" + std::to_string(last), 8);
            }
            const std::string cell = code + "/" + (hash ? "h" : "s");
            out << (il % kPerLine + 1 == kPerLine || il + 1 == L ? cell : pad(cell, 7));

            // The tensors the kind implies, as llama.cpp's loader requires them.
            const std::string b = "blk." + std::to_string(il) + ".";
            const bool comp = file.find_tensor(b + "attn_compressor_kv.weight") != nullptr;
            const bool idx = file.find_tensor(b + "indexer.proj.weight") != nullptr;
            const bool tid = file.find_tensor(b + "ffn_gate_tid2eid.weight") != nullptr;
            const bool bias = file.find_tensor(b + "exp_probs_b.bias") != nullptr;
            if ((ratio != 0) != comp)
                warnings.push_back("layer " + std::to_string(il) + ": ratio " + std::to_string(ratio) +
                                   (comp ? " but it has compressor tensors" : " but no compressor tensors"));
            if ((ratio == 4) != idx)
                warnings.push_back("layer " + std::to_string(il) + ": ratio " + std::to_string(ratio) +
                                   (idx ? " but it has indexer tensors" : " but no indexer tensors"));
            if (hash && !tid) warnings.push_back("layer " + std::to_string(il) + ": hash-routed but no ffn_gate_tid2eid");
            if (!hash && !bias) warnings.push_back("layer " + std::to_string(il) + ": scored but no exp_probs_b");
        }
        out << "\n  counts: " << attn_count["D"] << " dense, " << attn_count["C4"] << " ratio-4, "
            << attn_count["C128"] << " ratio-128";
        const int other = static_cast<int>(L) - attn_count["D"] - attn_count["C4"] - attn_count["C128"];
        if (other) out << ", " << other << " other";
        out << "; " << hash_count << " hash-routed, " << (L - hash_count) << " scored MoE";
        if (ratios->ints.size() > L) out << "; " << (ratios->ints.size() - L) << " extra ratio entries (MTP)";
        out << "\n";
        for (const auto& w : warnings) out << "  warning: " << w << "\n";
    }

    // Quant mix: per role, each type with its tensor count.
    std::map<std::string, std::map<std::string, int>> mix;
    for (const auto& t : file.tensors()) ++mix[role_of(t.name)][std::string(ggml_type_name(t.type))];
    out << "\ndeepseek4 quant mix:\n";
    for (const auto& role : role_order()) {
        auto it = mix.find(role);
        if (it == mix.end()) continue;
        std::string types;
        for (const auto& [type, n] : it->second) types += (types.empty() ? "" : ", ") + type + " x" + std::to_string(n);
        out << "  " << pad(role, 20) << types << "\n";
    }
}

}  // namespace ds4

// Which tensors a process needs, from llama.cpp's GGUF tensor names.
#include <charconv>
#include <string_view>

#include "mapping/model_map.h"

namespace ds4 {
namespace {

// "blk.12.ffn_up_exps.weight" → layer 12, rest "ffn_up_exps.weight".
bool split_block_name(std::string_view name, int& layer, std::string_view& rest) {
    constexpr std::string_view kPrefix = "blk.";
    if (!name.starts_with(kPrefix)) return false;
    const char* first = name.data() + kPrefix.size();
    const char* last = name.data() + name.size();
    int n = 0;
    const auto [p, ec] = std::from_chars(first, last, n);
    if (ec != std::errc() || p == first || p == last || *p != '.' || n < 0) return false;
    // "blk.01." is not a name llama.cpp writes; refuse it rather than guess.
    if (*first == '0' && p - first > 1) return false;
    layer = n;
    rest = std::string_view(p + 1, static_cast<size_t>(last - p - 1));
    return true;
}

// The part of a tensor name before its first '.': "output_norm.weight" →
// "output_norm".
std::string_view base_name(std::string_view name) { return name.substr(0, name.find('.')); }

}  // namespace

int tensor_layer(const std::string& name) {
    int layer = -1;
    std::string_view rest;
    return split_block_name(name, layer, rest) ? layer : -1;
}

TensorRole tensor_role(const std::string& name) {
    int layer = -1;
    std::string_view rest;
    if (split_block_name(name, layer, rest)) {
        // Routed experts are the tensors indexed by expert id: ffn_gate_exps,
        // ffn_up_exps, ffn_down_exps, ffn_gate_up_exps, their .scale /
        // .input_scale / .bias companions (same base name), and the other
        // ffn_*exps* variants llama.cpp knows (ffn_norm_exps, ffn_*_chexps).
        // Shared experts ("_shexp", no 's') and the router (ffn_gate_inp,
        // exp_probs_b) run for every token and are non-routed.
        const std::string_view base = base_name(rest);
        if (base.starts_with("ffn_") && base.find("exps") != std::string_view::npos) return TensorRole::RoutedExperts;
        return TensorRole::NonRouted;
    }
    const std::string_view base = base_name(name);
    if (base == "token_embd") return TensorRole::Embedding;
    // The output head: output.weight, output_norm.*, and the other tensors
    // llama.cpp applies after the last block (DeepSeek V4's output_hc_*,
    // output_res_score); a process that computes logits needs all of them.
    if (base == "output" || base.starts_with("output_")) return TensorRole::Output;
    // Everything else outside the blocks (rope_freqs, rope_factors_*,
    // token_types, per_layer_token_embd, ...) is a global that the layers
    // read; see MapSelection::selects.
    return TensorRole::NonRouted;
}

bool MapSelection::selects(const std::string& tensor_name) const {
    const TensorRole role = tensor_role(tensor_name);
    if (role == TensorRole::Embedding) return embedding;
    if (role == TensorRole::Output) return output;
    if (!(role == TensorRole::RoutedExperts ? routed_experts : non_routed)) return false;
    const int layer = tensor_layer(tensor_name);
    const bool slice_empty = layers.end != LayerRange::kThroughLast && layers.end <= layers.begin;
    if (layer < 0) {
        // A global non-layer tensor (rope_freqs, ...) is read by the layers
        // themselves, so every stage that runs at least one layer needs it,
        // wherever the slice lies. Such tensors are small: mapping them in
        // every stage costs little, while leaving one out breaks a stage.
        return !slice_empty;
    }
    return layer >= layers.begin && (layers.end == LayerRange::kThroughLast || layer < layers.end);
}

}  // namespace ds4

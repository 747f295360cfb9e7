// Which transformer blocks a process runs: the half-open range [begin, end)
// of the model's blocks, and whether it owns the output head (final norm +
// lm_head). The stage that starts at block 0 also embeds the tokens. One
// type for the command line (--layers), the model map's selection, the
// loaders and ds4-bench.
//
// The command line spells ranges DwarfStar 4's way, both ends inclusive,
// and names the head as "output": "0:29" for blocks 0..29 (no head, even
// when 29 is the last block), "30:output" for block 30 through the last
// block and the head, "0:29,output" for blocks 0..29 and the head (a
// pipeline coordinator that applies the head to the final hidden state its
// last worker sends back).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ds4 {

struct LayerRange {
    static constexpr int kThroughLast = -1;
    // Who owns the head. Ranges built in code keep the old rule (the range
    // holding the last block applies it); the command line always says.
    enum class Head : uint8_t { kWithLastBlock, kOwned, kNone };
    int begin = 0;
    int end = kThroughLast;  // exclusive; kThroughLast: through the last block
    Head head = Head::kWithLastBlock;

    static LayerRange all() { return {}; }
    bool is_all() const { return begin == 0 && end == kThroughLast && head != Head::kNone; }
    // The exclusive end for a model of n_layer blocks.
    int end_of(int n_layer) const { return end == kThroughLast ? n_layer : end; }
    int count(int n_layer) const { return end_of(n_layer) - begin; }
    // The same blocks with the end and the head spelled out for a model of
    // n_layer blocks (head kOwned or kNone).
    LayerRange resolved(int n_layer) const;
    bool contains(int layer, int n_layer) const { return layer >= begin && layer < end_of(n_layer); }
    bool has_embedding() const { return begin == 0; }
    bool has_last_block(int n_layer) const { return end_of(n_layer) == n_layer; }
    // Owns the head: maps and binds its tensors.
    bool has_output(int n_layer) const {
        return head == Head::kOwned || (head == Head::kWithLastBlock && has_last_block(n_layer));
    }
    // The head runs in the same forward pass, right after the last block.
    bool head_follows_blocks(int n_layer) const { return has_output(n_layer) && has_last_block(n_layer); }
    // Owns the head but not the last blocks: the head runs on the final
    // hidden state that the pipeline route returns.
    bool head_apart(int n_layer) const { return has_output(n_layer) && !has_last_block(n_layer); }
    // The command-line spelling for a model of n_layer blocks: "A:B" (both
    // inclusive), "A:output" (through the last block, with the head) or
    // "A:B,output".
    std::string spelling(int n_layer) const;
    // The spelling without knowing the model: "A:B", "A:B,output" or
    // "A:output" (kThroughLast).
    std::string spelling() const;
    bool operator==(const LayerRange&) const = default;
};

// Parses --layers ("A:B", both inclusive, A <= B; "N:output"; or
// "A:B,output"). Throws ds4::UsageError with one sentence naming --layers
// and the value.
LayerRange parse_layer_range(std::string_view text);

// What is wrong with the range for a model of n_layer blocks, as the end of
// a sentence ("40:47 is outside the model's 32 layers (0..31)", "3:2 holds
// no block"), or "" when it fits. One check for every caller; each wraps it
// in its own error (a usage error for --layers, a load error for a file).
std::string layer_range_problem(const LayerRange& range, int n_layer);

// --layers against a model of n_layer blocks: the resolved range, or
// ds4::UsageError ("--layers 40:47 is outside the model's 32 layers (0..31)").
LayerRange check_layers_flag(const LayerRange& range, int n_layer);

}  // namespace ds4

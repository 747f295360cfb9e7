// Which transformer blocks a process runs: the half-open range [begin, end)
// of the model's blocks. The stage that starts at block 0 also embeds the
// tokens; the stage that holds the last block also applies the output head
// (final norm + lm_head). One type for the command line (--layers), the
// model map's selection, the loaders and ds4-bench.
//
// The command line spells ranges DwarfStar 4's way, both ends inclusive:
// "0:29" for blocks 0..29, "30:output" for block 30 through the last block
// and the head.
#pragma once

#include <string>
#include <string_view>

namespace ds4 {

struct LayerRange {
    static constexpr int kThroughLast = -1;
    int begin = 0;
    int end = kThroughLast;  // exclusive; kThroughLast: through the last block

    static LayerRange all() { return {}; }
    bool is_all() const { return begin == 0 && end == kThroughLast; }
    // The exclusive end for a model of n_layer blocks.
    int end_of(int n_layer) const { return end == kThroughLast ? n_layer : end; }
    int count(int n_layer) const { return end_of(n_layer) - begin; }
    // The same blocks with the end spelled out for a model of n_layer blocks.
    LayerRange resolved(int n_layer) const { return {begin, end_of(n_layer)}; }
    bool contains(int layer, int n_layer) const { return layer >= begin && layer < end_of(n_layer); }
    bool has_embedding() const { return begin == 0; }
    bool has_output(int n_layer) const { return end_of(n_layer) == n_layer; }
    // The command-line spelling for a model of n_layer blocks: "A:B" (both
    // inclusive) or "A:output" when the range reaches the last block.
    std::string spelling(int n_layer) const;
    // The spelling without knowing the model: "A:B", or "A:output" for kThroughLast.
    std::string spelling() const;
    bool operator==(const LayerRange&) const = default;
};

// Parses --layers ("A:B", both inclusive, A <= B; or "N:output"). Throws
// ds4::UsageError with one sentence naming --layers and the value.
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

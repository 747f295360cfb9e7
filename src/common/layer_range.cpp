#include "common/layer_range.h"

#include <charconv>

#include "common/error.h"

namespace ds4 {

namespace {

constexpr int kMaxLayer = 1 << 20;  // far beyond any model; keeps int math safe

std::string quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

[[noreturn]] void malformed(std::string_view text) {
    throw UsageError("--layers must be A:B, N:output or A:B,output, got " + quoted(text));
}

int parse_layer(std::string_view part, std::string_view whole) {
    int v = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec == std::errc::invalid_argument || end != part.data() + part.size()) malformed(whole);
    if (ec == std::errc::result_out_of_range || v < 0 || v > kMaxLayer)
        throw UsageError("--layers layer numbers must be in [0, " + std::to_string(kMaxLayer) + "], got " +
                         quoted(whole));
    return v;
}

}  // namespace

LayerRange LayerRange::resolved(int n_layer) const {
    return {begin, end_of(n_layer), has_output(n_layer) ? Head::kOwned : Head::kNone};
}

std::string LayerRange::spelling(int n_layer) const {
    const std::string blocks = std::to_string(begin) + ":" + std::to_string(end_of(n_layer) - 1);
    if (!has_output(n_layer)) return blocks;
    return has_last_block(n_layer) ? std::to_string(begin) + ":output" : blocks + ",output";
}

std::string LayerRange::spelling() const {
    if (end == kThroughLast) return std::to_string(begin) + (head == Head::kNone ? ":last" : ":output");
    const std::string blocks = std::to_string(begin) + ":" + std::to_string(end - 1);
    return head == Head::kOwned ? blocks + ",output" : blocks;
}

LayerRange parse_layer_range(std::string_view text) {
    // "A:B,output": the blocks, and the head apart from them.
    constexpr std::string_view kWithHead = ",output";
    const bool with_head = text.ends_with(kWithHead);
    const std::string_view blocks = with_head ? text.substr(0, text.size() - kWithHead.size()) : text;
    const size_t colon = blocks.find(':');
    if (colon == std::string_view::npos || blocks.find(':', colon + 1) != std::string_view::npos) malformed(text);
    const std::string_view a = blocks.substr(0, colon), b = blocks.substr(colon + 1);
    LayerRange r;
    r.begin = parse_layer(a, text);
    if (b == "output") {
        if (with_head) malformed(text);  // "A:output,output"
        r.head = LayerRange::Head::kOwned;
        return r;
    }
    const int last = parse_layer(b, text);
    if (r.begin > last) throw UsageError("--layers A:B needs A <= B, got " + quoted(text));
    r.end = last + 1;
    r.head = with_head ? LayerRange::Head::kOwned : LayerRange::Head::kNone;
    return r;
}

std::string layer_range_problem(const LayerRange& r, int n_layer) {
    const std::string have = "the model's " + std::to_string(n_layer) + " layers (0.." + std::to_string(n_layer - 1) + ")";
    if (n_layer <= 0) return "the model has no layers";
    if (r.begin < 0 || r.begin >= n_layer || r.end_of(n_layer) > n_layer) return r.spelling() + " is outside " + have;
    if (r.end_of(n_layer) <= r.begin) return r.spelling() + " holds no layer";
    return "";
}

LayerRange check_layers_flag(const LayerRange& range, int n_layer) {
    if (const std::string problem = layer_range_problem(range, n_layer); !problem.empty())
        throw UsageError("--layers " + problem);
    return range.resolved(n_layer);
}

}  // namespace ds4

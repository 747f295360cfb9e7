#include "cli/layers_spec.h"

#include <charconv>

#include "cli/cli_values.h"
#include "common/error.h"

namespace ds4 {

namespace {

constexpr int kMaxLayer = 1 << 20;  // far beyond any model; keeps int math safe

[[noreturn]] void malformed(std::string_view text) {
    throw UsageError("--layers must be A:B or N:output, got " + quote_value(text));
}

int parse_layer(std::string_view part, std::string_view whole) {
    int v = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec == std::errc::invalid_argument || end != part.data() + part.size()) malformed(whole);
    if (ec == std::errc::result_out_of_range || v < 0 || v > kMaxLayer)
        throw UsageError("--layers layer numbers must be in [0, " + std::to_string(kMaxLayer) + "], got " +
                         quote_value(whole));
    return v;
}

}  // namespace

std::string LayersSpec::to_string() const {
    return std::to_string(first) + ":" + (through_output ? std::string("output") : std::to_string(last));
}

LayersSpec parse_layers_spec(std::string_view text) {
    size_t colon = text.find(':');
    if (colon == std::string_view::npos || text.find(':', colon + 1) != std::string_view::npos) malformed(text);
    std::string_view a = text.substr(0, colon);
    std::string_view b = text.substr(colon + 1);

    LayersSpec spec;
    spec.first = parse_layer(a, text);
    if (b == "output") {
        spec.through_output = true;
        return spec;
    }
    spec.last = parse_layer(b, text);
    if (spec.first > spec.last)
        throw UsageError("--layers A:B needs A <= B, got " + quote_value(text));
    return spec;
}

void layers_spec_check_against_model(const LayersSpec& spec, int n_layers) {
    const std::string have = "the model's " + std::to_string(n_layers) + " layers (0.." +
                             std::to_string(n_layers - 1) + ")";
    if (spec.first >= n_layers || (!spec.through_output && spec.last >= n_layers))
        throw UsageError("--layers " + spec.to_string() + " is outside " + have);
}

}  // namespace ds4

#include "synth/synth_family.h"

#include <array>

#include "cli/cli_values.h"
#include "common/error.h"

namespace ds4 {

std::span<const SynthFamily* const> synth_families() {
    static const std::array<const SynthFamily*, 3> families = {&qwen3moe_synth_family(), &deepseek4_synth_family(),
                                                               &glm_dsa_synth_family()};
    return families;
}

const SynthFamily& synth_family(std::string_view arch) {
    std::string known;
    const auto all = synth_families();
    for (size_t i = 0; i < all.size(); ++i) {
        if (all[i]->arch == arch) return *all[i];
        known += std::string(i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + std::string(all[i]->arch);
    }
    throw UsageError("--arch must be " + known + ", got " + quote_value(std::string(arch)));
}

}  // namespace ds4

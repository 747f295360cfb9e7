#include "common/error.h"
#include "experts/expert_source.h"

namespace ds4 {

ExpertMatrices ResidentExperts::resolve(Backend& /*backend*/, const RoutedExperts& block, Routing& /*routing*/) {
    if (!block.gate.data || !block.up.data || !block.down.data)
        throw Error("the routed experts of block " + std::to_string(block.layer) +
                    " are not in the model map, and the resident expert source reads only the map.");
    return ExpertMatrices{block.gate, block.up, block.down, block.gate_scale, block.up_scale, block.down_scale};
}

}  // namespace ds4

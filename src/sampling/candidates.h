// The best tokens of one row of logits, best first (equal logits by lower
// id), as a backend's top_k_rows leaves them: what greedy decoding and
// top-k sampling read of a row, so the row itself need not leave the device.
#pragma once

#include <cstdint>
#include <vector>

namespace ds4 {

struct Candidates {
    std::vector<float> logits;
    std::vector<int32_t> ids;
    int32_t first_bad = -1;  // the lowest id whose logit is NaN or +infinity, or -1

    bool empty() const { return ids.empty(); }
};

}  // namespace ds4

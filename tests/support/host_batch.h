// One sequence's consecutive positions as a Batch for tests that call
// Model::forward directly, with the host arrays the batch points to.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "models/family.h"

namespace ds4::test {

struct HostBatch {
    std::vector<int32_t> tokens, positions, slots, logit_rows;
    Batch batch;  // its host pointers point into the vectors above (moving keeps them valid)
};

// `tokens` at positions pos0.. of slot 0 (slot_rows: the state's n_ctx);
// logits of every row, or of the last one.
inline HostBatch sequence_batch(Backend& be, std::span<const int32_t> tokens, int64_t pos0, int64_t slot_rows,
                                bool all_logits) {
    HostBatch h;
    const int64_t n = static_cast<int64_t>(tokens.size());
    h.tokens.assign(tokens.begin(), tokens.end());
    for (int64_t i = 0; i < n; ++i) {
        h.positions.push_back(static_cast<int32_t>(pos0 + i));
        h.slots.push_back(0);
        if (all_logits || i == n - 1) h.logit_rows.push_back(static_cast<int32_t>(i));
    }
    Batch& b = h.batch;
    b.n = n;
    b.token_ids = be.ints(h.tokens.data(), n);
    b.cache = CacheRows{be.ints(h.positions.data(), n), be.ints(h.slots.data(), n), slot_rows};
    b.n_logits = static_cast<int64_t>(h.logit_rows.size());
    b.logit_rows = be.ints(h.logit_rows.data(), b.n_logits);
    b.host_tokens = h.tokens.data();
    b.host_positions = h.positions.data();
    b.host_slots = h.slots.data();
    return h;
}

}  // namespace ds4::test

#include "experts/window_policy.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace ds4 {

WindowPolicy::WindowPolicy(const WindowPolicyOptions& o) : o_(o) {
    if (o.windows < 0 || o.slots < 0 || o.slots > o.windows || o.fill_per_step < 0 || o.swaps_per_step < 0)
        throw Error("expert windows: a policy for " + std::to_string(o.windows) + " windows and " +
                    std::to_string(o.slots) + " slots cannot be made.");
    decay_ = o.half_life_steps > 0 ? std::exp2(-1.0 / o.half_life_steps) : 0.0;
    score_.assign(size_t(o.windows), 0.0);
    slot_.assign(size_t(o.windows), -1);
    window_of_.assign(size_t(o.slots), -1);
    for (int64_t s = o.slots - 1; s >= 0; --s) free_.push_back(s);  // slot 0 taken first
}

void WindowPolicy::promote(int64_t w, int64_t s, WindowMoves& m) {
    slot_[size_t(w)] = s;
    window_of_[size_t(s)] = w;
    m.promote.emplace_back(w, s);
}

WindowMoves WindowPolicy::step(const int32_t* counts) {
    WindowMoves m;
    // The windows this step used that device memory does not back: the
    // candidates, hottest first (ties: the lower window first, for a fixed
    // order whatever the sort).
    std::vector<int64_t> want;
    for (int64_t w = 0; w < o_.windows; ++w) {
        score_[size_t(w)] = score_[size_t(w)] * decay_ + counts[w];
        if (counts[w] > 0 && slot_[size_t(w)] < 0) want.push_back(w);
    }
    if (o_.slots == 0 || want.empty()) return m;
    auto hotter = [this](int64_t a, int64_t b) {
        return score_[size_t(a)] != score_[size_t(b)] ? score_[size_t(a)] > score_[size_t(b)] : a < b;
    };
    std::sort(want.begin(), want.end(), hotter);
    size_t next = 0;
    for (int64_t n = 0; n < o_.fill_per_step && next < want.size() && !free_.empty(); ++n) {
        const int64_t s = free_.back();
        free_.pop_back();
        promote(want[next++], s, m);
    }
    if (next == want.size() || o_.swaps_per_step == 0) return m;
    // Replacements: the coldest promoted windows the step did not use.
    std::vector<int64_t> cold;
    for (int64_t s = 0; s < o_.slots; ++s) {
        const int64_t w = window_of_[size_t(s)];
        if (w >= 0 && counts[w] == 0) cold.push_back(w);
    }
    std::sort(cold.begin(), cold.end(), [&](int64_t a, int64_t b) { return hotter(b, a); });
    for (size_t c = 0; c < cold.size() && next < want.size() && int64_t(c) < o_.swaps_per_step; ++c) {
        const int64_t w = want[next], old = cold[c];
        if (!(score_[size_t(w)] > score_[size_t(old)] * o_.swap_ratio + o_.swap_margin)) break;
        const int64_t s = slot_[size_t(old)];
        slot_[size_t(old)] = -1;
        m.demote.push_back(old);
        promote(w, s, m);
        ++next;
    }
    return m;
}

WindowMoves WindowPolicy::preload(const std::vector<int64_t>& hottest_first) {
    WindowMoves m;
    for (const int64_t w : hottest_first) {
        if (free_.empty()) break;
        if (w < 0 || w >= o_.windows || slot_[size_t(w)] >= 0) continue;
        const int64_t s = free_.back();
        free_.pop_back();
        promote(w, s, m);
    }
    return m;
}

}  // namespace ds4

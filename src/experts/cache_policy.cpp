#include "experts/cache_policy.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace ds4 {

namespace {

uint64_t key(int layer, int64_t expert) { return (uint64_t(uint32_t(layer)) << 32) | uint32_t(expert); }

}  // namespace

CachePolicy::CachePolicy(const std::vector<PolicyBlock>& blocks, const CachePolicyOptions& options)
    : options_(options), order_(blocks) {
    if (options.slots < 0)
        throw Error("the expert cache needs a slot count of 0 (every expert) or more, not " +
                    std::to_string(options.slots) + ".");
    int64_t total = 0, widest = 0;
    for (const PolicyBlock& b : blocks) {
        block_[b.layer] = Block{b.n_expert, size_t(total)};
        total += b.n_expert;
        widest = std::max(widest, b.n_expert);
    }
    heat_.resize(size_t(total));
    half_life_ticks_ = std::max(1.0, options.half_life_steps * double(blocks.size()));
    // More slots than experts would never be filled; a cache that holds
    // every expert needs no scratch.
    n_slots_ = options.slots == 0 ? total : std::min<int64_t>(options.slots, total);
    n_scratch_ = n_slots_ < total ? std::min(std::max<int64_t>(0, options.experts_per_token), widest) : 0;
    slot_.resize(size_t(n_slots_));
    if (options.host_slots > 0 && n_slots_ < total) host_.resize(size_t(std::min(options.host_slots, total)));
}

double CachePolicy::heat_now(const Heat& h) const {
    return h.score * std::exp2(-double(tick_ - h.at) / half_life_ticks_);
}

void CachePolicy::warm(size_t index) {
    Heat& h = heat_[index];
    h.score = heat_now(h) + 1;
    h.at = tick_;
    ++h.count;
}

std::vector<CachePolicy::Refill> CachePolicy::refill_order(size_t wanted) const {
    std::vector<Refill> order;
    for (int64_t s = 0; s < n_slots_; ++s) {
        const Slot& c = slot_[size_t(s)];
        if (c.layer < 0) order.push_back(Refill{s, false, 0});
        else if (c.last_use != tick_) order.push_back(Refill{s, true, heat_now(heat_[c.heat])});  // not this step's
    }
    const auto colder = [&](const Refill& x, const Refill& y) {
        if (x.occupied != y.occupied) return !x.occupied;
        if (x.heat != y.heat) return x.heat < y.heat;
        const uint64_t ux = slot_[size_t(x.slot)].last_use, uy = slot_[size_t(y.slot)].last_use;
        return ux != uy ? ux < uy : x.slot < y.slot;
    };
    const size_t k = std::min(wanted, order.size());
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(k), order.end(), colder);
    order.resize(k);
    return order;
}

SlotPlan CachePolicy::plan(int layer, const std::vector<int32_t>& ids, int64_t rows) {
    const auto blk = block_.find(layer);
    if (blk == block_.end()) throw Error("the expert cache was not built for block " + std::to_string(layer) + ".");
    const Block& B = blk->second;
    SlotPlan p;
    p.wanted = ids;
    std::sort(p.wanted.begin(), p.wanted.end());
    p.wanted.erase(std::unique(p.wanted.begin(), p.wanted.end()), p.wanted.end());
    ++tick_;
    for (int32_t e : p.wanted) {
        if (e < 0 || e >= B.n_expert)
            throw Error("routing chose expert " + std::to_string(e) + " of " + std::to_string(B.n_expert) +
                        " in block " + std::to_string(layer) + ".");
        warm(B.first + size_t(e));
    }
    std::vector<int32_t> misses;
    for (int32_t e : p.wanted) {
        const auto it = where_.find(key(layer, e));
        if (it != where_.end()) p.slot_of[e] = int32_t(it->second);
        else misses.push_back(e);
    }
    // The whole block when the slots cannot hold this step, or when a
    // multi-row step would read most of the block anyway: three long reads
    // beat many short ones, and the slots keep what decode wants.
    const bool multi_row = rows > 1;
    p.whole = int64_t(p.wanted.size()) > n_slots_ + n_scratch_;
    if (!p.whole && multi_row && options_.prefill == PrefillStrategy::full_layer) p.whole = true;
    if (!p.whole && multi_row && options_.prefill == PrefillStrategy::automatic)
        p.whole = int64_t(misses.size()) * 4 >= B.n_expert * 3;
    if (p.whole) {
        p.slot_of.clear();
        return p;
    }

    counts_.lookups += p.wanted.size();
    counts_.hits += p.wanted.size() - misses.size();
    for (const auto& [e, s] : p.slot_of) slot_[size_t(s)].last_use = tick_;
    // The hottest misses take remembered slots first; a miss colder than
    // every evictable expert goes to scratch while scratch lasts.
    std::sort(misses.begin(), misses.end(), [&](int32_t a, int32_t b) {
        return heat_[B.first + size_t(a)].score > heat_[B.first + size_t(b)].score;
    });
    // The slots to refill, coldest first, ranked once per step (not once
    // per miss: a cache of thousands of slots is scanned on every block).
    const std::vector<Refill> order = misses.empty() ? std::vector<Refill>{} : refill_order(misses.size());
    size_t next = 0;
    int64_t next_scratch = n_slots_;
    for (int32_t e : misses) {
        ++counts_.misses;
        const bool scratch_left = next_scratch < n_slots_ + n_scratch_;
        const bool colder = next < order.size() && order[next].occupied &&
                            heat_now(heat_[B.first + size_t(e)]) < order[next].heat;
        int64_t s;
        if (scratch_left && (next == order.size() || colder)) {
            s = next_scratch++;
            ++counts_.scratch_loads;
        } else {
            s = order[next++].slot;  // counted above: a slot not in use exists
            Slot& v = slot_[size_t(s)];
            if (v.layer >= 0) {
                where_.erase(key(v.layer, v.expert));
                ++counts_.evictions;
            }
            v = Slot{layer, e, tick_, B.first + size_t(e)};
            where_[key(layer, e)] = s;
        }
        p.loads.emplace_back(s, e);
        p.slot_of[e] = int32_t(s);
    }
    return p;
}

int64_t CachePolicy::host_find(int layer, int64_t expert) {
    const auto it = host_where_.find(key(layer, expert));
    if (it == host_where_.end()) return -1;
    host_[size_t(it->second)].last_use = tick_;
    return it->second;
}

int64_t CachePolicy::host_claim(int layer, int64_t expert) {
    // A free slot, else the least recently used one not used this step.
    int64_t victim = -1;
    for (int64_t s = 0; s < int64_t(host_.size()); ++s) {
        const HostSlot& c = host_[size_t(s)];
        if (c.layer < 0) {
            victim = s;
            break;
        }
        if (c.last_use < tick_ && (victim < 0 || c.last_use < host_[size_t(victim)].last_use)) victim = s;
    }
    if (victim < 0) return -1;
    HostSlot& v = host_[size_t(victim)];
    if (v.layer >= 0) host_where_.erase(key(v.layer, v.expert));
    v = HostSlot{layer, expert, tick_};
    host_where_[key(layer, expert)] = victim;
    return victim;
}

HostPlan CachePolicy::plan_host(int layer, const std::vector<std::pair<int64_t, int64_t>>& loads) {
    HostPlan h;
    h.route.assign(loads.size(), HostRoute::file);
    h.slot.assign(loads.size(), -1);
    if (host_.empty()) return h;
    for (size_t i = 0; i < loads.size(); ++i) {
        const int64_t expert = loads[i].second;
        if ((h.slot[i] = host_find(layer, expert)) >= 0) {
            h.route[i] = HostRoute::hit;
            ++counts_.host_hits;
        } else if ((h.slot[i] = host_claim(layer, expert)) >= 0) {
            h.route[i] = HostRoute::claimed;
        }
    }
    return h;
}

void CachePolicy::forget(int layer, const std::vector<std::pair<int64_t, int64_t>>& loads, const HostPlan& host) {
    for (const auto& [slot, expert] : loads) {
        if (slot >= n_slots_) continue;
        where_.erase(key(layer, expert));
        slot_[size_t(slot)] = Slot{};
    }
    for (size_t i = 0; i < host.route.size() && i < loads.size(); ++i) {
        if (host.route[i] != HostRoute::claimed) continue;
        const auto it = host_where_.find(key(layer, loads[i].second));
        if (it == host_where_.end()) continue;
        host_[size_t(it->second)] = HostSlot{};
        host_where_.erase(it);
    }
}

void CachePolicy::fill_host(const std::function<void(int, int64_t, int64_t)>& fill) {
    const uint64_t now = tick_;
    tick_ = 0;
    for (const PolicyBlock& b : order_)
        for (int64_t e = 0; e < b.n_expert; ++e) {
            const int64_t s = host_claim(b.layer, e);
            if (s >= 0 && fill) fill(b.layer, e, s);
        }
    tick_ = now;
}

std::unordered_map<int, std::vector<std::pair<int64_t, int64_t>>> CachePolicy::preload(
    const std::vector<std::pair<int, int64_t>>& experts) {
    std::unordered_map<int, std::vector<std::pair<int64_t, int64_t>>> by_layer;
    int64_t free = 0;
    for (const Slot& s : slot_) free += s.layer < 0;
    for (const auto& [layer, expert] : experts) {
        if (free == 0) break;
        const auto blk = block_.find(layer);
        if (blk == block_.end() || expert < 0 || expert >= blk->second.n_expert) continue;
        if (where_.count(key(layer, expert))) continue;
        int64_t s = 0;
        while (slot_[size_t(s)].layer >= 0) ++s;
        slot_[size_t(s)] = Slot{layer, expert, 0, blk->second.first + size_t(expert)};
        where_[key(layer, expert)] = s;
        heat_[blk->second.first + size_t(expert)].score = 1;
        by_layer[layer].emplace_back(s, expert);
        --free;
    }
    return by_layer;
}

bool CachePolicy::holds(int layer, int64_t expert) const { return where_.count(key(layer, expert)) > 0; }

ExpertCounts CachePolicy::routing_counts() const {
    ExpertCounts out;
    for (const PolicyBlock& b : order_) {
        const size_t first = block_.at(b.layer).first;
        for (int64_t e = 0; e < b.n_expert; ++e)
            if (const uint64_t c = heat_[first + size_t(e)].count) out.push_back({{b.layer, e}, c});
    }
    return out;
}

}  // namespace ds4

#include "pipeline/route.h"

#include <algorithm>

#include "common/error.h"
#include "engine/downstream.h"

namespace ds4 {

namespace {
// "blocks 3..5" or "block 3".
std::string blocks(int a, int b_exclusive) {
    if (b_exclusive - a == 1) return "block " + std::to_string(a);
    return "blocks " + std::to_string(a) + ".." + std::to_string(b_exclusive - 1);
}
}  // namespace

std::string describe_slice(const wire::Slice& s) {
    std::string out = s.end() > s.begin() ? blocks(s.begin(), s.end()) : std::string();
    if (s.output()) out += out.empty() ? "the head" : " + head";
    return out;
}

wire::Slice make_slice(const LayerRange& layers, int n_layer) {
    wire::Slice s;
    s.set_begin(layers.begin);
    s.set_end(layers.end_of(n_layer));
    s.set_embedding(layers.has_embedding());
    s.set_output(layers.has_output(n_layer));
    return s;
}

RouteTable::RouteTable(int n_layer, int first_block, bool head_on_coordinator)
    : n_layer_(n_layer), first_block_(first_block), head_on_coordinator_(head_on_coordinator) {}

std::string RouteTable::head_problem(const wire::Slice& s) const {
    // The coordinator's and the worker's spellings, for the advice.
    const std::string mine = "0:" + std::to_string(first_block_ - 1);
    const std::string theirs = std::to_string(s.begin()) + ":" + std::to_string(s.end() - 1);
    if (s.output() && s.end() != n_layer_)
        return "it holds the output head without the model's last block " + std::to_string(n_layer_ - 1) + ".";
    if (s.output() && head_on_coordinator_)
        return "it holds the output head (--layers " + std::to_string(s.begin()) +
               ":output), and so does this coordinator (--layers " + mine +
               ",output); the head runs once: start the last worker with --layers " + theirs +
               ", or the coordinator with --layers " + mine + ".";
    if (!s.output() && s.end() == n_layer_ && !head_on_coordinator_)
        return "its " + describe_slice(s) + " end the model without the output head, and this coordinator does not " +
               "hold it either (--layers " + mine + "); start the last worker with --layers " +
               std::to_string(s.begin()) + ":output, or the coordinator with --layers " + mine + ",output.";
    return "";
}

std::string RouteTable::add(const wire::Registration& r, Clock::time_point now) {
    const wire::Slice& s = r.slice();
    if (s.begin() < 0 || s.end() > n_layer_ || s.begin() >= s.end())
        return "its slice (" + std::to_string(s.begin()) + ".." + std::to_string(s.end() - 1) +
               ") is not a block range of this model's " + std::to_string(n_layer_) + " blocks.";
    if (s.begin() < first_block_)
        return "its " + describe_slice(s) + " overlap the coordinator's " + blocks(0, first_block_) + ".";
    if (std::string why = head_problem(s); !why.empty()) return why;
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->reg.worker_id() == r.worker_id()) {
            it->reg = r;
            it->seen = now;
            return "";
        }
    }
    // A new process: it takes the place of any entry with the same slice
    // (a restarted worker) and of stale ones; a live overlap is refused.
    std::erase_if(entries_, [&](const Entry& e) {
        const bool same = e.reg.slice().begin() == s.begin() && e.reg.slice().end() == s.end();
        return same || now - e.seen > kStaleAfter;
    });
    for (const Entry& e : entries_) {
        const wire::Slice& o = e.reg.slice();
        if (o.begin() < s.end() && s.begin() < o.end())
            return "its " + describe_slice(s) + " overlap " + describe_slice(o) + " of the worker at " +
                   e.reg.address() + ".";
    }
    entries_.push_back(Entry{r, now});
    return "";
}

std::vector<wire::Hop> RouteTable::hops_locked(Clock::time_point now, std::string* problem) const {
    std::vector<const Entry*> live;
    for (const Entry& e : entries_)
        if (now - e.seen <= kStaleAfter) live.push_back(&e);
    std::sort(live.begin(), live.end(),
              [](const Entry* a, const Entry* b) { return a->reg.slice().begin() < b->reg.slice().begin(); });
    std::vector<wire::Hop> hops;
    std::vector<std::string> missing, doubled;
    int next = first_block_;
    for (const Entry* e : live) {
        const wire::Slice& s = e->reg.slice();
        if (s.begin() > next) missing.push_back(blocks(next, s.begin()));
        if (s.begin() < next) doubled.push_back(blocks(s.begin(), std::min(next, s.end())));
        next = std::max(next, s.end());
        wire::Hop h;
        h.set_address(e->reg.address());
        *h.mutable_slice() = s;
        hops.push_back(std::move(h));
    }
    if (next < n_layer_) missing.push_back(blocks(next, n_layer_));
    std::string why;
    auto join = [](const std::vector<std::string>& v) {
        std::string s;
        for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
        return s;
    };
    if (!missing.empty()) why = "no worker serves " + join(missing);
    if (!doubled.empty()) why += std::string(why.empty() ? "" : "; ") + "more than one worker serves " + join(doubled);
    if (why.empty() && !hops.empty() && !head_on_coordinator_ && !hops.back().slice().output())
        why = "the last worker (" + hops.back().address() + ") does not hold the output head, nor does the coordinator";
    if (why.empty() && !hops.empty() && head_on_coordinator_ && hops.back().slice().output())
        why = "the last worker (" + hops.back().address() + ") and the coordinator both hold the output head";
    if (why.empty() && hops.empty()) why = "no worker has registered";
    if (problem) *problem = why.empty() ? "" : "the pipeline route is incomplete: " + why + ".";
    return hops;
}

std::vector<wire::Hop> RouteTable::hops(Clock::time_point now) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string why;
    std::vector<wire::Hop> h = hops_locked(now, &why);
    if (!why.empty()) throw StageUnavailable(why);
    return h;
}

std::string RouteTable::problem(Clock::time_point now) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string why;
    hops_locked(now, &why);
    return why;
}

}  // namespace ds4

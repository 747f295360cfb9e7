#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace ds4 {
namespace {

// Higher logit first; equal logits by lower id, so results never depend on
// how a partial sort happened to order ties.
template <class C>
bool better(const C& a, const C& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// A uniform double in [0, 1) from the top 53 bits: the same on every
// standard library, unlike std::uniform_real_distribution.
double uniform01(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

}  // namespace

uint64_t random_sampler_seed() {
    std::random_device device;
    return (uint64_t(device()) << 32) ^ uint64_t(device());
}

Sampler::Sampler(const SamplerParams& params) : params_(params), rng_(params.seed) {
    if (std::isnan(params.temperature)) throw Error("sampler temperature is NaN; use a number (0 or less means greedy).");
    if (params.top_k < 0) {
        throw Error("sampler top_k is " + std::to_string(params.top_k) + ", but it must be 0 (off) or a positive count.");
    }
    if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) {
        throw Error("sampler top_p is " + std::to_string(params.top_p) + ", but it must be in (0, 1] (1 turns it off).");
    }
    if (!(params.min_p >= 0.0f && params.min_p <= 1.0f)) {
        throw Error("sampler min_p is " + std::to_string(params.min_p) + ", but it must be in [0, 1] (0 turns it off).");
    }
}

int32_t Sampler::sample(std::span<const float> logits) {
    if (logits.empty()) throw Error("cannot sample from an empty row of logits.");
    if (logits.size() > size_t(INT32_MAX)) throw Error("the row of logits is larger than any token id can address.");

    // One pass validates the row and finds the argmax (greedy's answer).
    int32_t best = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
        const float l = logits[i];
        if (std::isnan(l) || l == INFINITY) {
            throw Error("logit of token " + std::to_string(i) + " is " + (std::isnan(l) ? "NaN" : "+infinity") +
                        "; the model produced an invalid row.");
        }
        if (l > logits[best]) best = int32_t(i);
    }
    if (params_.temperature <= 0.0f) return best;
    if (logits[best] == -INFINITY) throw Error("every logit is -infinity, so no token can be sampled.");

    keep_top_k(logits);
    return draw_from_candidates();
}

int32_t Sampler::draw_from_candidates() {
    keep_top_p();
    keep_min_p();
    return draw();
}

int Sampler::candidates_needed() const {
    if (params_.temperature <= 0.0f) return 1;
    return params_.top_k;
}

int32_t Sampler::sample(const Candidates& best) {
    if (best.ids.empty() || best.logits.size() != best.ids.size())
        throw Error("cannot sample from an empty (or mismatched) list of candidate tokens.");
    if (best.first_bad >= 0)
        throw Error("logit of token " + std::to_string(best.first_bad) +
                    " is NaN or +infinity; the model produced an invalid row.");
    if (params_.temperature <= 0.0f) return best.ids[0];
    if (params_.top_k <= 0) throw Error("sampling without top-k needs the whole row of logits, not candidates.");
    if (best.logits[0] == -INFINITY) throw Error("every logit is -infinity, so no token can be sampled.");
    // What keep_top_k leaves: the top_k best, best first, less trailing
    // banned tokens (the best is finite).
    candidates_.clear();
    const size_t k = std::min(best.ids.size(), size_t(params_.top_k));
    for (size_t i = 0; i < k; ++i) candidates_.push_back({best.logits[i], best.ids[i]});
    while (candidates_.back().logit == -INFINITY) candidates_.pop_back();
    sorted_ = candidates_.size();
    return draw_from_candidates();
}

// Keeps the top_k best tokens (all finite tokens when top_k is off). A
// bounded heap touches each logit once and only reorders the few that beat
// the current k-th best, so a 150k vocabulary costs one linear scan.
void Sampler::keep_top_k(std::span<const float> logits) {
    candidates_.clear();
    sorted_ = 0;
    const size_t k = size_t(params_.top_k);
    if (k == 0 || k >= logits.size()) {
        for (size_t i = 0; i < logits.size(); ++i) {
            if (logits[i] != -INFINITY) candidates_.push_back({logits[i], int32_t(i)});
        }
        return;
    }
    auto worse_on_top = [](const Candidate& a, const Candidate& b) { return better(a, b); };
    for (size_t i = 0; i < k; ++i) candidates_.push_back({logits[i], int32_t(i)});
    std::make_heap(candidates_.begin(), candidates_.end(), worse_on_top);
    for (size_t i = k; i < logits.size(); ++i) {
        const Candidate c{logits[i], int32_t(i)};
        if (better(c, candidates_.front())) {
            std::pop_heap(candidates_.begin(), candidates_.end(), worse_on_top);
            candidates_.back() = c;
            std::push_heap(candidates_.begin(), candidates_.end(), worse_on_top);
        }
    }
    std::sort_heap(candidates_.begin(), candidates_.end(), worse_on_top);  // best first
    while (candidates_.back().logit == -INFINITY) candidates_.pop_back();  // the best is finite
    sorted_ = candidates_.size();
}

// Makes sure the first `count` candidates are in final order, growing the
// sorted head geometrically: nucleus sampling usually stops after a few
// dozen tokens, so a 150k row is never fully sorted.
void Sampler::sort_head(size_t count) {
    if (count <= sorted_) return;
    const size_t target = std::min(candidates_.size(), std::max({count, sorted_ * 4, size_t(64)}));
    auto by_rank = [](const Candidate& a, const Candidate& b) { return better(a, b); };
    const auto first = candidates_.begin() + std::ptrdiff_t(sorted_);
    const auto last = candidates_.begin() + std::ptrdiff_t(target);
    // Selection then a sort of the chunk: linear in the rest plus m log m,
    // cheaper than partial_sort's heap once chunks grow to thousands.
    if (last != candidates_.end()) std::nth_element(first, last - 1, candidates_.end(), by_rank);
    std::sort(first, last, by_rank);
    sorted_ = target;
}

// Nucleus: the smallest head of the distribution (at temperature 1) whose
// mass reaches top_p; the token that crosses the line is kept.
void Sampler::keep_top_p() {
    if (params_.top_p >= 1.0f || candidates_.size() <= 1) return;
    sort_head(1);
    const double max_logit = candidates_[0].logit;
    double total = 0.0;
    for (const Candidate& c : candidates_) total += std::exp(double(c.logit) - max_logit);
    const double target = double(params_.top_p) * total;
    double mass = 0.0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
        sort_head(i + 1);
        mass += std::exp(double(candidates_[i].logit) - max_logit);
        if (mass >= target) {
            candidates_.resize(i + 1);
            sorted_ = i + 1;
            return;
        }
    }
}

// Drops tokens less likely than min_p times the most likely one, computed on
// logits as llama.cpp does: logit >= max_logit + log(min_p).
void Sampler::keep_min_p() {
    if (params_.min_p <= 0.0f || candidates_.size() <= 1) return;
    sort_head(1);
    const float threshold = candidates_[0].logit + std::log(params_.min_p);
    // The sorted head stays a sorted head: remove_if keeps relative order and
    // the survivors of the head are the largest of all survivors.
    const auto head_end = candidates_.begin() + std::ptrdiff_t(sorted_);
    const auto head_kept = std::partition_point(candidates_.begin(), head_end,
                                                [&](const Candidate& c) { return c.logit >= threshold; });
    sorted_ = size_t(head_kept - candidates_.begin());
    candidates_.erase(std::remove_if(candidates_.begin(), candidates_.end(),
                                     [&](const Candidate& c) { return c.logit < threshold; }),
                      candidates_.end());
}

// Softmax at the requested temperature over the survivors, then one draw.
int32_t Sampler::draw() {
    sort_head(1);
    const double max_logit = candidates_[0].logit;
    const double inv_temperature = 1.0 / double(params_.temperature);
    double total = 0.0;
    for (const Candidate& c : candidates_) total += std::exp((double(c.logit) - max_logit) * inv_temperature);
    const double point = uniform01(rng_) * total;
    double mass = 0.0;
    for (const Candidate& c : candidates_) {
        mass += std::exp((double(c.logit) - max_logit) * inv_temperature);
        if (point < mass) return c.id;
    }
    return candidates_.back().id;  // rounding left the point just past the end
}

}  // namespace ds4

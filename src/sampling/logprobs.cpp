#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace ds4 {

SampledLogprobs sampled_logprobs(std::span<const float> logits, int32_t sampled, int n_top) {
    if (logits.empty()) throw Error("cannot take log probabilities of an empty row of logits.");
    if (sampled < 0 || static_cast<size_t>(sampled) >= logits.size())
        throw Error("token " + std::to_string(sampled) + " is outside the row of " + std::to_string(logits.size()) +
                    " logits.");
    n_top = std::clamp(n_top, 0, kMaxTopLogprobs);
    // log p_i = l_i - (max + log sum_j exp(l_j - max)), the sum in double:
    // a 150k-token row of float terms would lose the small ones.
    float max = -INFINITY;
    for (float l : logits) max = std::max(max, l);
    double sum = 0.0;
    if (max != -INFINITY)
        for (float l : logits) sum += std::exp(double(l) - double(max));
    const double log_z = double(max) + std::log(sum);
    auto logprob = [&](float l) { return l == -INFINITY ? -INFINITY : static_cast<float>(double(l) - log_z); };

    SampledLogprobs out;
    out.sampled = {sampled, logprob(logits[static_cast<size_t>(sampled)])};
    if (n_top == 0) return out;
    // The n best in one pass: a small sorted list, most likely first; a
    // logit enters only when it beats the list's last entry.
    auto better = [](const TokenLogprob& a, const TokenLogprob& b) {
        return a.logprob > b.logprob || (a.logprob == b.logprob && a.id < b.id);
    };
    std::vector<TokenLogprob> best;  // logits for now, converted at the end
    best.reserve(static_cast<size_t>(n_top) + 1);
    for (size_t i = 0; i < logits.size(); ++i) {
        const TokenLogprob c{static_cast<int32_t>(i), logits[i]};
        if (c.logprob == -INFINITY) continue;
        if (best.size() == static_cast<size_t>(n_top) && !better(c, best.back())) continue;
        best.insert(std::upper_bound(best.begin(), best.end(), c, better), c);
        if (best.size() > static_cast<size_t>(n_top)) best.pop_back();
    }
    for (TokenLogprob& t : best) t.logprob = logprob(t.logprob);
    out.top = std::move(best);
    return out;
}

}  // namespace ds4

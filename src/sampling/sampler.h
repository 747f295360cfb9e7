// Token sampler: picks the next token id from a row of logits.
//
// The chain follows llama.cpp's default order (penalties and the rarer
// samplers left out):
//
//   top-k  →  top-p  →  min-p  →  temperature  →  draw
//
// so top-p and min-p judge probabilities at temperature 1, and temperature
// only reshapes the distribution over the tokens that survived. Each stage
// keeps at least one token. temperature <= 0 skips the chain: greedy argmax,
// ties going to the lowest token id.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "sampling/candidates.h"

namespace ds4 {

// A fresh, unpredictable seed (std::random_device), for SamplerParams' default.
uint64_t random_sampler_seed();

struct SamplerParams {
    float temperature = 0.8f;  // <= 0: greedy
    int top_k = 40;            // 0: off; keep the k most likely tokens
    float top_p = 0.95f;       // in (0, 1]; 1: off; keep the smallest head with mass >= top_p
    float min_p = 0.05f;       // in [0, 1]; 0: off; keep tokens with p >= min_p * p_max
    uint64_t seed = random_sampler_seed();
};

class Sampler {
public:
    // Throws ds4::Error when a parameter is out of range.
    explicit Sampler(const SamplerParams& params);

    // Same seed and same logits give the same sequence of tokens. Throws
    // ds4::Error on an empty row or a NaN / +infinity logit; -infinity marks
    // a banned token.
    int32_t sample(std::span<const float> logits);

    // How many of a row's best tokens sample() of candidates needs to draw
    // exactly what sample() of the whole row would: 1 for greedy, top_k
    // when top-k is on; 0 when the whole row is needed (top-k off).
    int candidates_needed() const;
    // The same token sample() of the whole row gives, from its best
    // candidates_needed() tokens or more (fewer only when the row holds no
    // more), same draws from the same seed. Throws as sample() does.
    int32_t sample(const Candidates& best);

    const SamplerParams& params() const { return params_; }

private:
    struct Candidate {
        float logit;
        int32_t id;
    };

    void keep_top_k(std::span<const float> logits);
    // top-p, min-p, temperature and the draw over candidates_ (top-k done).
    int32_t draw_from_candidates();
    void keep_top_p();
    void keep_min_p();
    int32_t draw();
    void sort_head(size_t count);

    SamplerParams params_;
    std::mt19937_64 rng_;
    std::vector<Candidate> candidates_;  // reused between calls: no allocation per token
    size_t sorted_ = 0;                  // candidates_[0, sorted_) are in final descending order
};

}  // namespace ds4

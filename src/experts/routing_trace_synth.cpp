#include "experts/routing_trace_synth.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "common/error.h"

namespace ds4 {

RoutingTrace zipf_routing_trace(const TraceShape& shape, uint64_t tokens, double s, uint64_t seed) {
    if (shape.blocks < 1 || shape.blocks > kTraceMaxBlocks || shape.experts < 1 || shape.experts > (1 << 20) ||
        shape.experts_per_token < 1 || shape.experts_per_token > std::min(shape.experts, kTraceMaxExpertsPerToken))
        throw Error("a routing trace needs 1 to 65536 blocks, 1 to 1048576 experts and 1 to min(experts, 1024) "
                    "experts per token.");
    if (!(s >= 0) || !std::isfinite(s)) throw Error("the Zipf exponent must be 0 or more.");
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    RoutingTrace t;
    char src[160];
    std::snprintf(src, sizeof src, "generated: %s s=%g, %llu tokens, seed %llu", s == 0 ? "uniform" : "zipf", s,
                  static_cast<unsigned long long>(tokens), static_cast<unsigned long long>(seed));
    t.source = src;
    t.experts_per_token = shape.experts_per_token;
    const size_t E = size_t(shape.experts), K = size_t(shape.experts_per_token);
    // Popularity of each id, per block: rank r (from 1) weighs r^-s, ranks
    // dealt to ids by a fresh permutation.
    std::vector<std::vector<double>> weight(size_t(shape.blocks), std::vector<double>(E));
    for (int64_t b = 0; b < shape.blocks; ++b) {
        t.blocks.push_back(PolicyBlock{int(b), shape.experts});
        std::vector<size_t> id(E);
        std::iota(id.begin(), id.end(), size_t{0});
        std::shuffle(id.begin(), id.end(), rng);
        for (size_t r = 0; r < E; ++r) weight[size_t(b)][id[r]] = std::pow(double(r + 1), -s);
    }
    t.routes.reserve(size_t(tokens * uint64_t(shape.blocks)));
    t.ids.reserve(size_t(tokens * uint64_t(shape.blocks) * K));
    std::vector<double> w(E);
    for (uint64_t tok = 0; tok < tokens; ++tok)
        for (int64_t b = 0; b < shape.blocks; ++b) {
            t.routes.push_back(TraceRoute{int(b), 1, t.ids.size()});
            w = weight[size_t(b)];
            for (size_t k = 0; k < K; ++k) {
                const double sum = std::accumulate(w.begin(), w.end(), 0.0);  // afresh: no drift
                double x = unit(rng) * sum;
                size_t pick = E;
                for (size_t e = 0; e < E; ++e) {
                    if (w[e] <= 0) continue;
                    pick = e;  // the last one with weight, should rounding leave x over
                    if ((x -= w[e]) < 0) break;
                }
                t.ids.push_back(int32_t(pick));
                w[pick] = 0;
            }
        }
    return t;
}

}  // namespace ds4

// GLM-5's (glm-dsa) op pack on CUDA against the CPU backend (the reference),
// on fresh random inputs at the shapes of the tiny synthetic model, of
// llama.cpp's generator file (one head over a 512-wide latent) and of GLM-5
// (64 heads of 192 + 64 over a 512 + 64 latent cache, 256 experts, 8 used,
// indexer top-k 2048), plus odd sizes; several sequence slots, positions
// past the indexer's top-k, empty and full row sets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "cuda_ops_fixture.h"
#include "models/glm_dsa/glm_dsa_ops.h"

namespace ds4 {
namespace {

using cudatest::random_floats;

class CudaGlmDsaOps : public cudatest::CudaOpsFixture {
protected:
    GlmDsaOps& cpu_ops() { return glm_dsa_ops(*cpu_); }
    GlmDsaOps& gpu_ops() { return glm_dsa_ops(*gpu_); }

    // Rows of distinct (slot, position) pairs: runs of consecutive
    // positions (decodes and chunks) of shuffled slots, starting anywhere
    // before max_pos (clamped to the slot's rows).
    struct Rows {
        std::vector<int32_t> positions, slots;
    };
    Rows random_rows(int n_slots, int max_run, int64_t slot_rows) {
        std::vector<int32_t> order(static_cast<size_t>(n_slots));
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng_);
        std::uniform_int_distribution<int> run(1, max_run);
        Rows r;
        for (int32_t slot : order) {
            const int n = std::min<int>(run(rng_), int(slot_rows));
            std::uniform_int_distribution<int64_t> start(0, slot_rows - n);
            const int64_t p0 = start(rng_);
            for (int i = 0; i < n; ++i) {
                r.positions.push_back(int32_t(p0 + i));
                r.slots.push_back(slot);
            }
        }
        return r;
    }
};

TEST_F(CudaGlmDsaOps, CacheStoreAtEachRowsSlotAndPosition) {
    for (int64_t cols : {int64_t(32), int64_t(37), int64_t(512), int64_t(64)})
        for (int max_run : {1, 9, 300}) {
            const int n_slots = 5;
            const int64_t slot_rows = 311;
            const Rows b = random_rows(n_slots, max_run, slot_rows);
            const int64_t n = int64_t(b.positions.size());
            auto [pc, pg] = ints(b.positions);
            auto [sc, sg] = ints(b.slots);
            const CacheRows wc{pc, sc, slot_rows}, wg{pg, sg, slot_rows};
            auto [cc, cg] = pair(n_slots * slot_rows, cols);
            auto [rc, rg] = pair(n, cols, -3.0f, 3.0f);
            cpu_ops().cache_store(cc, rc, wc);
            gpu_ops().cache_store(cg, rg, wg);
            EXPECT_TRUE(close(cc, cg, 0.0, "cache_store cols " + std::to_string(cols) + ", " + std::to_string(n) +
                                               " rows"));
            const RowSets vc = cpu_ops().plan_causal(wc, n), vg = gpu_ops().plan_causal(wg, n);
            EXPECT_EQ(vg.cap, vc.cap);
            EXPECT_EQ(host_ints(*gpu_, vg.count), host_ints(*cpu_, vc.count));
            EXPECT_EQ(host_ints(*gpu_, vg.base), host_ints(*cpu_, vc.base));
        }
    auto [cc, cg] = pair(10, 8);
    auto [rc, rg] = pair(1, 9);
    auto [pc, pg] = ints({0});
    auto [sc, sg] = ints({0});
    EXPECT_THROW(gpu_ops().cache_store(cg, rg, CacheRows{pg, sg, 10}), Error);  // rows wider than the cache
}

TEST_F(CudaGlmDsaOps, LayerNormWithAndWithoutAffine) {
    for (int64_t cols : {int64_t(64), int64_t(128), int64_t(37), int64_t(512)})
        for (int64_t rows : {1, 7, 70})
            for (int affine = 0; affine < 4; ++affine)
                for (float eps : {0.0f, 1e-6f}) {
                    const bool with_w = affine & 1, with_b = affine & 2;
                    const WeightRef w = f32_vector(random_floats(rng_, size_t(cols), 0.5f, 1.5f));
                    const WeightRef bi = f32_vector(random_floats(rng_, size_t(cols), -0.5f, 0.5f));
                    // Keys of a projection: an offset and a spread per row.
                    std::vector<float> x = random_floats(rng_, size_t(rows * cols), -2.0f, 2.0f);
                    for (int64_t r = 0; r < rows; ++r)
                        for (int64_t i = 0; i < cols; ++i) x[size_t(r * cols + i)] += float(r % 5) - 2.0f;
                    auto [xc, xg] = same(x, rows, cols);
                    auto [yc, yg] = zeros(rows, cols);
                    const std::string what = "layer_norm cols " + std::to_string(cols) + " rows " +
                                             std::to_string(rows) + " affine " + std::to_string(affine) + " eps " +
                                             std::to_string(eps);
                    cpu_ops().layer_norm(xc, with_w ? &w : nullptr, with_b ? &bi : nullptr, eps, yc);
                    gpu_ops().layer_norm(xg, with_w ? &w : nullptr, with_b ? &bi : nullptr, eps, yg);
                    EXPECT_TRUE(close(yc, yg, 1e-6, what));
                    cpu_ops().layer_norm(xc, with_w ? &w : nullptr, with_b ? &bi : nullptr, eps, xc);  // in place
                    gpu_ops().layer_norm(xg, with_w ? &w : nullptr, with_b ? &bi : nullptr, eps, xg);
                    EXPECT_TRUE(close(xc, xg, 1e-6, what + " in place"));
                }
}

TEST_F(CudaGlmDsaOps, HeadColumnsSlices) {
    struct Shape {
        int heads, head_dim, offset, width;
    };
    // GLM-5 query nope / rope parts, a kv row's latent / rope key, tiny ones, odd ones.
    for (const Shape s : {Shape{64, 256, 0, 192}, Shape{64, 256, 192, 64}, Shape{1, 576, 0, 512},
                          Shape{1, 576, 512, 64}, Shape{4, 48, 32, 16}, Shape{3, 37, 5, 11}, Shape{7, 9, 0, 9}})
        for (int64_t rows : {1, 5, 66}) {
            auto [xc, xg] = pair(rows, int64_t(s.heads) * s.head_dim);
            auto [yc, yg] = zeros(rows, int64_t(s.heads) * s.width);
            cpu_ops().head_columns(xc, s.heads, s.head_dim, s.offset, s.width, yc);
            gpu_ops().head_columns(xg, s.heads, s.head_dim, s.offset, s.width, yg);
            EXPECT_TRUE(close(yc, yg, 0.0, "head_columns " + std::to_string(s.heads) + " x " +
                                               std::to_string(s.head_dim) + " [" + std::to_string(s.offset) + ", +" +
                                               std::to_string(s.width) + ") rows " + std::to_string(rows)));
        }
    auto [xc, xg] = pair(2, 4 * 48);
    auto [yc, yg] = zeros(2, 4 * 20);
    EXPECT_THROW(gpu_ops().head_columns(xg, 4, 48, 30, 20, yg), Error);  // past the head
}

TEST_F(CudaGlmDsaOps, SigmoidRoutingChoosesTheCpuExperts) {
    struct Shape {
        int n_exp, n_used, groups, groups_used;
    };
    // GLM-5 (no groups), the tiny preset and the oracle files (4 groups, 2
    // used), an odd one (one expert per group).
    for (const Shape s : {Shape{256, 8, 1, 1}, Shape{8, 2, 4, 2}, Shape{8, 3, 4, 2}, Shape{160, 6, 8, 3},
                          Shape{5, 2, 5, 3}})
        for (int64_t rows : {1, 9, 70})
            for (int variant = 0; variant < 4; ++variant) {
                const bool with_bias = variant & 1, norm = variant & 2;
                const float scale = norm ? 2.5f : 1.0f;
                const WeightRef bias = f32_vector(random_floats(rng_, size_t(s.n_exp), -0.1f, 0.1f));
                auto [lc, lg] = pair(rows, s.n_exp, -4.0f, 4.0f);
                const Routing rc = cpu_ops().route_sigmoid(lc, with_bias ? &bias : nullptr, s.n_used, s.groups,
                                                           s.groups_used, norm, scale);
                const Routing rg = gpu_ops().route_sigmoid(lg, with_bias ? &bias : nullptr, s.n_used, s.groups,
                                                           s.groups_used, norm, scale);
                const std::string what = "route_sigmoid " + std::to_string(s.n_exp) + "/" + std::to_string(s.n_used) +
                                         " groups " + std::to_string(s.groups) + "/" + std::to_string(s.groups_used) +
                                         " rows " + std::to_string(rows) + " variant " + std::to_string(variant);
                EXPECT_EQ(host_ints(*gpu_, rg.experts), host_ints(*cpu_, rc.experts)) << what;
                EXPECT_TRUE(close(rc.weights, rg.weights, 1e-6, what));
            }
    auto [lc, lg] = pair(2, 8);
    EXPECT_THROW(gpu_ops().route_sigmoid(lg, nullptr, 5, 4, 2, true, 1.0f), Error);  // 2 groups of 2 hold 4
}

TEST_F(CudaGlmDsaOps, LatentAttentionOverListedAndCausalRows) {
    struct Shape {
        int heads, d_lat, d_pe;
        int64_t top_k;
    };
    // tiny preset, llama.cpp's generator file, GLM-5, odd sizes.
    for (const Shape s : {Shape{4, 32, 16, 16}, Shape{1, 512, 64, 32}, Shape{64, 512, 64, 2048},
                          Shape{3, 40, 12, 7}, Shape{5, 100, 36, 50}}) {
        const int n_slots = 3;
        const int64_t slot_rows = s.top_k + 300;  // positions past the top-k
        const float scale = 1.0f / std::sqrt(float(s.d_lat + s.d_pe));
        auto [lc, lg] = pair(n_slots * slot_rows, s.d_lat, -2.0f, 2.0f);
        auto [ec, eg] = pair(n_slots * slot_rows, s.d_pe, -2.0f, 2.0f);
        // Decodes and chunks (shorter at GLM-5's shape: the CPU reference is slow there).
        for (int max_run : {1, s.heads >= 64 ? 4 : 12}) {
            const Rows b = random_rows(n_slots, max_run, slot_rows);
            const int64_t T = int64_t(b.positions.size());
            const int64_t H = s.heads;
            auto [qc, qg] = pair(T, H * s.d_lat, -1.0f, 1.0f);
            auto [pc, pg] = pair(T, H * s.d_pe, -1.0f, 1.0f);
            // The indexer's form: up to top_k rows of the row's slot, any order.
            std::vector<int32_t> count(static_cast<size_t>(T)), listed(static_cast<size_t>(T * s.top_k), -1);
            for (int64_t t = 0; t < T; ++t) {
                const int64_t seen = b.positions[size_t(t)] + 1;
                std::vector<int32_t> all(static_cast<size_t>(seen));
                std::iota(all.begin(), all.end(), int32_t(int64_t(b.slots[size_t(t)]) * slot_rows));
                std::shuffle(all.begin(), all.end(), rng_);
                count[size_t(t)] = int32_t(std::min(seen, s.top_k));
                std::copy_n(all.begin(), count[size_t(t)], listed.begin() + t * s.top_k);
            }
            count[0] = 0;  // nothing listed: zeros
            auto [nc, ng] = ints(count);
            auto [rc_, rg_] = ints(listed);
            const RowSets listed_c{nc, {}, rc_, s.top_k}, listed_g{ng, {}, rg_, s.top_k};
            auto [pos_c, pos_g] = ints(b.positions);
            auto [sl_c, sl_g] = ints(b.slots);
            const RowSets causal_c = cpu_ops().plan_causal({pos_c, sl_c, slot_rows}, T);
            const RowSets causal_g = gpu_ops().plan_causal({pos_g, sl_g, slot_rows}, T);
            for (bool causal : {false, true}) {
                auto [oc, og] = zeros(T, H * s.d_lat);
                cpu_ops().attention_latent(qc, pc, lc, ec, causal ? causal_c : listed_c, s.heads, scale, oc);
                gpu_ops().attention_latent(qg, pg, lg, eg, causal ? causal_g : listed_g, s.heads, scale, og);
                EXPECT_TRUE(close(oc, og, 1e-5, std::string(causal ? "causal" : "listed") + " rows, " +
                                                    std::to_string(s.heads) + " heads of " + std::to_string(s.d_lat) +
                                                    " + " + std::to_string(s.d_pe) + ", runs up to " +
                                                    std::to_string(max_run)));
            }
        }
    }
    auto [qc, qg] = pair(1, 2 * 600);
    auto [pc, pg] = pair(1, 2 * 16);
    auto [lc, lg] = pair(4, 600);
    auto [ec, eg] = pair(4, 16);
    auto [oc, og] = zeros(1, 2 * 600);
    auto [nc, ng] = ints({1});
    auto [bc, bg] = ints({0});
    EXPECT_THROW(gpu_ops().attention_latent(qg, pg, lg, eg, RowSets{ng, bg, {}, 4}, 2, 1.0f, og), Error);  // 600 > 512
}

}  // namespace
}  // namespace ds4

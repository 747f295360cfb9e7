// DeepSeek V4's ops on CUDA against the CPU backend (the reference), on
// fresh random inputs at the shapes of the tiny synthetic model and of
// DeepSeek V4 Flash (head 512, window 128, 64 heads, indexer 64 x 128 with
// top-k 512, 4 hyper-connection streams), with the edge cases the forward
// pass meets: no compressed rows yet, a window not yet full, a chunk longer
// than the window, fewer visible blocks than top-k, chunks of many rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "common/error.h"
#include "cuda_ops_fixture.h"
#include "quant/quant.h"

namespace ds4 {
namespace {

using cudatest::random_floats;
using cudatest::rel_l2;

class CudaDsv4Ops : public cudatest::CudaOpsFixture {
protected:
    // `matrices` random matrices [rows x k] of type t (quantized random
    // floats of std ~1/sqrt(k)), resident on the GPU.
    WeightRef weight(GgmlType t, int64_t k, int64_t rows, int64_t matrices = 1) {
        if (!quantize_supported(t)) return cudatest::CudaOpsFixture::weight(t, k, rows, matrices);  // random blocks
        std::vector<uint8_t>* bytes = nullptr;
        WeightRef w = new_weight(t, k, rows, matrices, bytes);
        const float sigma = 1.0f / std::sqrt(float(k));
        for (int64_t r = 0; r < rows * matrices; ++r) {
            const auto f = random_floats(rng_, size_t(k), -sigma, sigma);
            quantize_row(t, f.data(), bytes->data() + size_t(r) * w.row_bytes, k);
        }
        attach(w);
        return w;
    }
};

// DeepSeek V4's two RoPE settings: window layers (plain, base 10000) and
// compressed layers (base 160000, YaRN factor 16 over 65536 positions).
RopeParams dsv4_rope(int n_rot, bool yarn, bool neox) {
    RopeParams p;
    p.n_rot = n_rot;
    p.neox = neox;
    p.freq_base = yarn ? 160000.0f : 10000.0f;
    if (yarn) {
        p.freq_scale = 1.0f / 16.0f;
        p.ext_factor = 1.0f;
        p.n_ctx_orig = 65536;
    }
    return p;
}

TEST_F(CudaDsv4Ops, RopePartialOnTheHeadTailForwardAndInverse) {
    struct Shape {
        int heads, head_dim, n_rot;
    };
    // tiny attention, Flash attention (64 x 512, 64 rotated), Flash indexer (64 x 128).
    for (const Shape s : {Shape{8, 64, 32}, Shape{64, 512, 64}, Shape{64, 128, 64}})
        for (bool yarn : {false, true})
            for (bool neox : {false, true})
                for (bool inverse : {false, true}) {
                    const RopeParams p = dsv4_rope(s.n_rot, yarn, neox);
                    std::uniform_int_distribution<int32_t> pos(0, 70000);
                    std::vector<int32_t> positions(7);
                    for (auto& q : positions) q = pos(rng_);
                    positions[0] = 0;
                    const auto [pc, pg] = ints(positions);
                    auto [xc, xg] = pair(7, int64_t(s.heads) * s.head_dim, -2.0f, 2.0f);
                    const int offset = s.head_dim - s.n_rot;
                    dsv4_ops(*cpu_).rope_partial(xc, s.head_dim, offset, pc, p, inverse);
                    gpu_->rope_partial(xg, s.head_dim, offset, pg, p, inverse);
                    EXPECT_TRUE(close(xc, xg, 2e-5,
                                      "rope_partial head " + std::to_string(s.head_dim) + " yarn=" +
                                          std::to_string(yarn) + " neox=" + std::to_string(neox) +
                                          " inverse=" + std::to_string(inverse)));
                }
    // Forward then inverse gives the input back (up to rounding) where the
    // magnitude is 1 (YaRN scales both ways by its mscale).
    const RopeParams p = dsv4_rope(64, false, false);
    const auto [pc, pg] = ints({5, 123, 4096});
    auto [xc, xg] = pair(3, 4 * 512);
    gpu_->rope_partial(xg, 512, 448, pg, p, false);
    gpu_->rope_partial(xg, 512, 448, pg, p, true);
    EXPECT_TRUE(close(xc, xg, 1e-6, "rope_partial round trip"));
    EXPECT_THROW(gpu_->rope_partial(xg, 512, 460, pg, p, false), Error);
}

TEST_F(CudaDsv4Ops, HcMixesWithSinkhornAndPreOnly) {
    const int hc = 4;
    const int mix = (2 + hc) * hc;
    for (int iters : {20, 1})
        for (int64_t rows : {1, 7, 33}) {
            const HcParams hp{hc, 1e-6f, iters};
            const WeightRef scale = f32_vector(random_floats(rng_, 3, 0.1f, 2.0f));
            const WeightRef base = f32_vector(random_floats(rng_, mix, -1.0f, 1.0f));
            auto [mc, mg] = pair(rows, mix, -3.0f, 3.0f);
            auto [prc, prg] = zeros(rows, hc);
            auto [poc, pog] = zeros(rows, hc);
            auto [cc, cg] = zeros(rows, hc * hc);
            dsv4_ops(*cpu_).hc_mixes(mc, scale, base, hp, prc, &poc, &cc);
            gpu_->hc_mixes(mg, scale, base, hp, prg, &pog, &cg);
            const std::string what = " rows " + std::to_string(rows) + " iters " + std::to_string(iters);
            EXPECT_TRUE(close(prc, prg, 1e-6, "hc pre" + what));
            EXPECT_TRUE(close(poc, pog, 1e-6, "hc post" + what));
            EXPECT_TRUE(close(cc, cg, 1e-5, "hc comb" + what));
        }
    // The output head: pre weights only, one scale, hc base values.
    const WeightRef scale = f32_vector(random_floats(rng_, 1, 0.1f, 2.0f));
    const WeightRef base = f32_vector(random_floats(rng_, hc, -1.0f, 1.0f));
    auto [mc, mg] = pair(5, hc, -3.0f, 3.0f);
    auto [prc, prg] = zeros(5, hc);
    dsv4_ops(*cpu_).hc_mixes(mc, scale, base, HcParams{hc, 1e-6f, 20}, prc, nullptr, nullptr);
    gpu_->hc_mixes(mg, scale, base, HcParams{hc, 1e-6f, 20}, prg, nullptr, nullptr);
    EXPECT_TRUE(close(prc, prg, 1e-6, "hc head pre"));
}

TEST_F(CudaDsv4Ops, HcCollapseAndExpand) {
    const int hc = 4;
    for (int64_t E : {256, 4096})
        for (int64_t rows : {1, 6}) {
            auto [xc, xg] = pair(rows, hc * E, -2.0f, 2.0f);
            auto [pc, pg] = pair(rows, hc, 0.0f, 1.0f);
            auto [oc, og] = zeros(rows, E);
            dsv4_ops(*cpu_).hc_collapse(xc, pc, oc);
            gpu_->hc_collapse(xg, pg, og);
            const std::string what = " E " + std::to_string(E) + " rows " + std::to_string(rows);
            EXPECT_TRUE(close(oc, og, 1e-7, "hc_collapse" + what));

            auto [yc, yg] = pair(rows, E, -2.0f, 2.0f);
            auto [postc, postg] = pair(rows, hc, 0.0f, 2.0f);
            auto [combc, combg] = pair(rows, hc * hc, 0.0f, 1.0f);
            auto [ec, eg] = zeros(rows, hc * E);
            dsv4_ops(*cpu_).hc_expand(yc, xc, postc, combc, ec);
            gpu_->hc_expand(yg, xg, postg, combg, eg);
            EXPECT_TRUE(close(ec, eg, 1e-7, "hc_expand" + what));
        }
}

TEST_F(CudaDsv4Ops, GroupedProjectionForFewAndManyTokens) {
    struct Shape {
        GgmlType type;
        int64_t k, r, G;
    };
    // tiny wo_a: 4 groups of 128 -> 32 in each type; Flash wo_a: 8 groups of 4096 -> 1024, Q8_0 as published;
    // GLM-5 q2's per-head wk_b (64 heads of 192 -> 512, Q4_0: the chunk kernel) and wv_b (512 -> 256, Q2_K: the
    // step kernel), and Q4_K groups (the warp kernel). All groups go in one launch; 65 and 100 tokens take the
    // batched cuBLAS product.
    for (const Shape s : {Shape{GgmlType::F32, 128, 32, 4}, Shape{GgmlType::F16, 128, 32, 4},
                          Shape{GgmlType::Q8_0, 128, 32, 4}, Shape{GgmlType::Q8_0, 4096, 1024, 8},
                          Shape{GgmlType::Q4_0, 192, 512, 64}, Shape{GgmlType::Q2_K, 512, 256, 64},
                          Shape{GgmlType::Q4_K, 256, 64, 8}}) {
        const WeightRef w = weight(s.type, s.k, s.r, s.G);
        for (int64_t T : {1, 3, 8, 9, 40, 65, 100}) {
            auto [xc, xg] = pair(T, s.G * s.k);
            auto [yc, yg] = zeros(T, s.G * s.r);
            dsv4_ops(*cpu_).matmul_grouped(w, xc, yc);
            gpu_->matmul_grouped(w, xg, yg);
            EXPECT_TRUE(close(yc, yg, 1e-5, std::string(ggml_type_name(s.type)) + " grouped k " +
                                                std::to_string(s.k) + " T " + std::to_string(T)));
        }
    }
    const WeightRef w = weight(GgmlType::F32, 128, 32, 4);
    auto [xc, xg] = pair(2, 100);
    auto [yc, yg] = zeros(2, 128);
    EXPECT_THROW(gpu_->matmul_grouped(w, xg, yg), Error);
}

TEST_F(CudaDsv4Ops, ClampedSwiglu) {
    for (float limit : {10.0f, 0.0f}) {
        auto [gc, gg] = pair(9, 2048, -20.0f, 20.0f);
        auto [uc, ug] = pair(9, 2048, -20.0f, 20.0f);
        auto [oc, og] = zeros(9, 2048);
        dsv4_ops(*cpu_).swiglu_clamp(gc, uc, limit, oc);
        gpu_->swiglu_clamp(gg, ug, limit, og);
        EXPECT_TRUE(close(oc, og, 1e-6, "swiglu_clamp limit " + std::to_string(limit)));
        dsv4_ops(*cpu_).swiglu_clamp(gc, uc, limit, gc);  // in place, as the MoE does
        gpu_->swiglu_clamp(gg, ug, limit, gg);
        EXPECT_TRUE(close(gc, gg, 1e-6, "swiglu_clamp in place limit " + std::to_string(limit)));
    }
}

// A batch of runs of consecutive positions of distinct slots (of n_slots),
// each starting anywhere below max_pos: decodes (runs of 1) and chunks.
struct RandomBatch {
    std::vector<int32_t> positions, slots;
};
RandomBatch random_batch(std::mt19937_64& rng, int n_slots, int max_run, int64_t max_pos) {
    std::vector<int32_t> order(static_cast<size_t>(n_slots));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::uniform_int_distribution<int> run(1, max_run);
    std::uniform_int_distribution<int64_t> start(0, max_pos);
    RandomBatch b;
    for (int32_t slot : order) {
        const int n = run(rng);
        const int64_t p0 = start(rng);
        for (int i = 0; i < n; ++i) {
            b.positions.push_back(int32_t(p0 + i));
            b.slots.push_back(slot);
        }
    }
    return b;
}

TEST_F(CudaDsv4Ops, IndexPlansAreTheCpuPlans) {
    for (int trial = 0; trial < 20; ++trial) {
        const RandomBatch b = random_batch(rng_, 1 + trial % 7, trial % 3 == 0 ? 1 : 300, 5000);
        const int64_t n = int64_t(b.positions.size());
        auto [pc, pg] = ints(b.positions);
        auto [sc, sg] = ints(b.slots);
        const CacheRows bc{pc, sc, 8192}, bg{pg, sg, 8192};
        const Dsv4Rows rc = dsv4_ops(*cpu_).plan_rows(bc, n), rg = gpu_->plan_rows(bg, n);
        EXPECT_EQ(host_ints(*gpu_, rg.run_first), host_ints(*cpu_, rc.run_first));
        EXPECT_EQ(host_ints(*gpu_, rg.run_last), host_ints(*cpu_, rc.run_last));
        EXPECT_EQ(host_ints(*gpu_, gpu_->plan_ring(rg, 128)), host_ints(*cpu_, dsv4_ops(*cpu_).plan_ring(rc, 128)));
        for (int ratio : {4, 128}) {
            const bool overlap = ratio == 4;
            const Dsv4CompressorPlan c = dsv4_ops(*cpu_).plan_compressor(rc, ratio, overlap, 8192 / ratio);
            const Dsv4CompressorPlan g = gpu_->plan_compressor(rg, ratio, overlap, 8192 / ratio);
            const std::string what = "ratio " + std::to_string(ratio) + ", " + std::to_string(n) + " rows";
            for (auto [x, y] : {std::pair{&c.in_block, &g.in_block}, {&c.sources, &g.sources},
                                {&c.block_pos, &g.block_pos}, {&c.cache_dst, &g.cache_dst}, {&c.ring_dst, &g.ring_dst},
                                {&c.visible.count, &g.visible.count}, {&c.visible.base, &g.visible.base}})
                EXPECT_EQ(host_ints(*gpu_, *y), host_ints(*cpu_, *x)) << what;
        }
    }
}

TEST_F(CudaDsv4Ops, CompressorPoolingOverlappedAndPlain) {
    struct Shape {
        int ratio;
        int64_t D;
    };
    // ratio 4 (overlapping, 8 sources) at tiny / Flash attention and indexer widths; ratio 128.
    for (const Shape s : {Shape{4, 64}, Shape{4, 512}, Shape{4, 128}, Shape{128, 64}, Shape{128, 512}}) {
        const bool overlap = s.ratio == 4;
        const int64_t coff = overlap ? 2 : 1, ring = 3 * coff * s.ratio, width = coff * s.D;  // rings of 3 slots
        const int per_block = int(coff * s.ratio);
        for (int64_t n : {int64_t(1), int64_t(3 * s.ratio + 1)}) {
            auto [skc, skg] = pair(ring, width, -2.0f, 2.0f);
            auto [ssc, ssg] = pair(ring, width, -4.0f, 4.0f);
            auto [kc, kg] = pair(n, width, -2.0f, 2.0f);
            auto [scc, scg] = pair(n, width, -4.0f, 4.0f);
            // Ids into [chunk rows | state rows]; the last row has no sources (zeros).
            const int64_t rows = n + 1;
            std::uniform_int_distribution<int32_t> id(-1, int32_t(ring + n - 1));
            std::vector<int32_t> sources(size_t(rows * per_block));
            for (auto& v : sources) v = id(rng_);
            for (int64_t b = 0; b < rows; ++b) sources[size_t(b * per_block + per_block - 1)] = int32_t(n);  // never empty
            if (overlap) std::fill(sources.begin(), sources.begin() + per_block / 2, -1);  // no previous block
            std::fill(sources.end() - per_block, sources.end(), -1);
            auto [ic, ig] = ints(sources);
            auto [oc, og] = pair(rows, s.D);
            dsv4_ops(*cpu_).compress_pool(skc, ssc, kc, scc, ic, per_block, overlap, oc);
            gpu_->compress_pool(skg, ssg, kg, scg, ig, per_block, overlap, og);
            EXPECT_TRUE(close(oc, og, 1e-6, "compress_pool ratio " + std::to_string(s.ratio) + " D " +
                                                std::to_string(s.D) + " chunk " + std::to_string(n)));
            const std::vector<float> last = host(og);
            EXPECT_TRUE(std::all_of(last.end() - s.D, last.end(), [](float v) { return v == 0.0f; }));
        }
    }
}

TEST_F(CudaDsv4Ops, ScatterRowsSkipsMinusOne) {
    for (int64_t n : {1, 40, 300}) {
        auto [sc, sg] = pair(n, 512);
        auto [dc, dg] = pair(400, 512);
        std::vector<int32_t> all(400);
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng_);
        std::vector<int32_t> d(all.begin(), all.begin() + n);  // distinct destinations
        for (size_t i = 0; i < d.size(); i += 3) d[i] = -1;
        auto [ic, ig] = ints(d);
        dsv4_ops(*cpu_).scatter_rows(sc, ic, dc);
        gpu_->scatter_rows(sg, ig, dg);
        EXPECT_TRUE(close(dc, dg, 0.0, "scatter_rows n " + std::to_string(n)));
    }
    auto [sc, sg] = pair(3, 64);
    auto [dc, dg] = pair(4, 64);
    auto [ic, ig] = ints({0, 1});
    EXPECT_THROW(gpu_->scatter_rows(sg, ig, dg), Error);  // 2 destinations for 3 rows
}

TEST_F(CudaDsv4Ops, BroadcastStreams) {
    auto [xc, xg] = pair(5, 96);
    auto [oc, og] = zeros(5, 4 * 96);
    dsv4_ops(*cpu_).broadcast_streams(xc, oc);
    gpu_->broadcast_streams(xg, og);
    EXPECT_TRUE(close(oc, og, 0.0, "broadcast_streams"));
    EXPECT_EQ(oc.data[3 * 96 + 7], xc.data[7]);
}

TEST_F(CudaDsv4Ops, IndexerTopkChoosesTheCpuRows) {
    struct Shape {
        int heads, dim;
        int64_t top_k, n_keys;
    };
    // tiny, Flash (64 x 128), GLM-5 (32 x 128; its top-k is 2048, 256 here keeps the CPU side quick).
    for (const Shape s : {Shape{8, 64, 16, 60}, Shape{64, 128, 512, 2100}, Shape{32, 128, 256, 700}}) {
        // Two slots' keys side by side. Duplicate and zero keys make exact
        // ties, which both must break by lower row.
        const int64_t rows = 2 * s.n_keys;
        std::vector<float> keys = random_floats(rng_, size_t(rows * s.dim));
        std::uniform_int_distribution<int64_t> row(0, rows - 1);
        for (int i = 0; i < int(rows / 6); ++i) {
            const int64_t a = row(rng_), b = row(rng_);
            std::copy_n(keys.begin() + a * s.dim, s.dim, keys.begin() + b * s.dim);
        }
        for (int i = 0; i < 3; ++i) std::fill_n(keys.begin() + row(rng_) * s.dim, s.dim, 0.0f);
        auto [kc, kg] = same(keys, rows, s.dim);
        for (int64_t T : {1, 7}) {
            auto [qc, qg] = pair(T, int64_t(s.heads) * s.dim);
            auto [wc, wg] = pair(T, s.heads, -0.5f, 1.0f);
            std::vector<int32_t> nv(static_cast<size_t>(T)), base(static_cast<size_t>(T));
            std::uniform_int_distribution<int32_t> vis(int32_t(s.top_k + 1), int32_t(s.n_keys));
            for (auto& v : nv) v = vis(rng_);
            for (size_t t = 0; t < base.size(); ++t) base[t] = int32_t(t % 2 ? s.n_keys : 0);
            nv[0] = int32_t(s.n_keys);
            if (T > 1) {
                nv[1] = int32_t(s.top_k);      // exactly top-k: all rows, unscored
                nv[2] = int32_t(s.top_k / 2);  // fewer
                nv[3] = 0;                     // nothing visible yet
            }
            // Contiguous sets, and the same sets listed row by row.
            std::vector<int32_t> listed(size_t(T * s.n_keys), -1);
            for (int64_t t = 0; t < T; ++t)
                for (int32_t j = 0; j < nv[size_t(t)]; ++j) listed[size_t(t * s.n_keys + j)] = base[size_t(t)] + j;
            auto [nc, ng] = ints(nv);
            auto [bc, bg] = ints(base);
            auto [lc, lg] = ints(listed);
            const RowSets contiguous_c{nc, bc, {}, s.n_keys}, contiguous_g{ng, bg, {}, s.n_keys};
            const RowSets listed_c{nc, {}, lc, s.n_keys}, listed_g{ng, {}, lg, s.n_keys};
            const RowSets rc = dsv4_ops(*cpu_).indexer_topk(qc, wc, kc, contiguous_c, s.top_k);
            for (const RowSets* in : {&contiguous_g, &listed_g}) {
                const RowSets rg = gpu_->indexer_topk(qg, wg, kg, *in, s.top_k);
                const std::vector<int32_t> cc = host_ints(*cpu_, rc.count), gc = host_ints(*gpu_, rg.count);
                EXPECT_EQ(gc, cc) << "indexer heads " << s.heads << " T " << T;
                const std::vector<int32_t> cr = host_ints(*cpu_, rc.rows), gr = host_ints(*gpu_, rg.rows);
                for (int64_t t = 0; t < T; ++t)
                    EXPECT_TRUE(std::equal(cr.begin() + t * s.top_k, cr.begin() + t * s.top_k + cc[size_t(t)],
                                           gr.begin() + t * s.top_k))
                        << "indexer heads " << s.heads << " T " << T << " row " << t;
            }
            const RowSets rl = dsv4_ops(*cpu_).indexer_topk(qc, wc, kc, listed_c, s.top_k);
            EXPECT_EQ(host_ints(*cpu_, rl.rows), host_ints(*cpu_, rc.rows));
        }
    }
}

TEST_F(CudaDsv4Ops, WindowAttentionWithCompressedRowsAndSinks) {
    struct Shape {
        int heads, dim;
        int64_t n_swa;
    };
    for (const Shape s : {Shape{8, 64, 32}, Shape{64, 512, 128}}) {
        const AttentionParams ap{s.heads, 1, s.dim, s.dim, 1.0f / std::sqrt(float(s.dim))};
        const WeightRef sinks = f32_vector(random_floats(rng_, size_t(s.heads), -2.0f, 2.0f));
        const int64_t n_comp = 40;
        const int n_slots = 5;
        auto [cc, cg] = pair(n_comp, s.dim, -2.0f, 2.0f);
        auto [wc, wg] = pair(n_slots * s.n_swa, s.dim, -2.0f, 2.0f);
        // Decodes, short chunks, chunks longer than the window, windows not yet full.
        for (int max_run : {1, 7, int(s.n_swa) + 9}) {
            const RandomBatch b = random_batch(rng_, n_slots, max_run, 3 * s.n_swa);
            const int64_t T = int64_t(b.positions.size());
            auto [pc, pg] = ints(b.positions);
            auto [sc, sg] = ints(b.slots);
            const Dsv4Rows rc = dsv4_ops(*cpu_).plan_rows({pc, sc, 0}, T), rg = gpu_->plan_rows({pg, sg, 0}, T);
            auto [qc, qg] = pair(T, int64_t(s.heads) * s.dim, -2.0f, 2.0f);
            auto [kc, kg] = pair(T, s.dim, -2.0f, 2.0f);
            const int64_t cap = 20;
            std::uniform_int_distribution<int> len(0, int(cap));
            std::uniform_int_distribution<int32_t> row(0, int32_t(n_comp - 1));
            std::vector<int32_t> count(static_cast<size_t>(T)), rows(static_cast<size_t>(T * cap), -1);
            for (int64_t t = 0; t < T; ++t) {
                count[size_t(t)] = len(rng_);
                for (int i = 0; i < count[size_t(t)]; ++i) rows[size_t(t * cap + i)] = row(rng_);
            }
            auto [nc, ng] = ints(count);
            auto [lc, lg] = ints(rows);
            const RowSets comp_c{nc, {}, lc, cap}, comp_g{ng, {}, lg, cap};
            for (bool with_comp : {false, true}) {
                auto [oc, og] = zeros(T, int64_t(s.heads) * s.dim);
                dsv4_ops(*cpu_).attention_window_sink(qc, kc, wc, rc, s.n_swa, with_comp ? &cc : nullptr,
                                                      with_comp ? &comp_c : nullptr, sinks, ap, oc);
                gpu_->attention_window_sink(qg, kg, wg, rg, s.n_swa, with_comp ? &cg : nullptr,
                                            with_comp ? &comp_g : nullptr, sinks, ap, og);
                EXPECT_TRUE(close(oc, og, 1e-5, "runs up to " + std::to_string(max_run) + (with_comp ? ", " : ", no ") +
                                                    "compressed rows, head " + std::to_string(s.dim)));
            }
        }
    }
}

}  // namespace
}  // namespace ds4

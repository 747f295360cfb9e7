// Whole-model logits of synthetic Qwen3-MoE files, CUDA against the CPU
// backend (cuda_model_fixture.h): prefill, chunked prefill and decode
// (recorded and replayed — checked to have really replayed — and op by op)
// within 1e-5 relative error per position, and the same greedy tokens over
// 64 steps. Models are made fresh
// each run: `ds4-gguf synth` (f32, q8_0) and llama.cpp's test-llama-archs +
// llama-quantize Q4_K_M (K-quants with q5_0/q8_0 fallbacks).
// DS4_CUDA_TEST_Q4KM names a ready Q4_K_M file instead, for GPU machines
// without the llama.cpp tools.
#include <algorithm>
#include <string>
#include <vector>

#include "cuda_model_fixture.h"
#include "support/batch_scenario.h"
#include "engine/slot_pool.h"
#include "experts/expert_cache.h"
#include "experts/expert_windows.h"

namespace ds4 {
namespace {

using cudatest::CudaModelFixture;

class CudaModel : public CudaModelFixture {
protected:
    cudatest::fs::path make_model(const std::string& kind) {
        if (kind != "q4_k_m") return synth("--arch qwen3moe --preset tiny --type " + kind, kind + ".gguf");
        if (const char* f = std::getenv("DS4_CUDA_TEST_Q4KM"); f && *f) return f;
        const uint32_t s = uint32_t(seed_ & 0x7fffffff);
        const auto bin = cudatest::fs::path(DS4_ORACLE_DIR) / "bin", lib = cudatest::fs::path(DS4_ORACLE_DIR) / "lib";
        const std::string env = "LD_LIBRARY_PATH=" + lib.string() + " ";
        std::string out;
        if (cudatest::run(env + (bin / "test-llama-archs").string() + " -a '^(qwen3moe)$' -s " + std::to_string(s) +
                              " -o " + dir_.string(),
                          &out) != 0)
            throw Error("test-llama-archs failed (set DS4_CUDA_TEST_Q4KM?): " + out);
        const auto q = dir_ / "q4km.gguf";
        if (cudatest::run(env + (bin / "llama-quantize").string() + " " + (dir_ / "qwen3moe-moe.gguf").string() + " " +
                              q.string() + " Q4_K_M 2",
                          &out) != 0)
            throw Error("llama-quantize failed: " + out);
        return q;
    }
};

TEST_P(CudaModel, LogitsAndGreedyTokensMatchCpu) {
    const auto l = load(make_model(GetParam()));
    CudaBackend gpu(0);
    gpu.attach_weights(*l.map);
    EXPECT_GT(gpu.resident_bytes(), 0u);
    compare_with_cpu(*l.model, gpu, random_prompt(l.model->info().n_vocab, 20, 40), 64, GetParam(),
                     Decode::replayed_and_op_by_op);
}

// --cuda-host-weights: the kernels read the mapped file through a host
// registration instead of a device copy; the numbers must not change.
// One weight type is enough for the registration path (not parameterised).
TEST_F(CudaModel, HostRegisteredWeightsMatchCpu) {
    const auto l = load(make_model("q8_0"));
    CudaBackend gpu(CudaOptions{0, true});
    gpu.attach_weights(*l.map);
    compare_with_cpu(*l.model, gpu, random_prompt(l.model->info().n_vocab, 10, 20), 8, "host-registered q8_0",
                     Decode::replayed_and_op_by_op);
}

// Weight source: the routed experts served by an expert cache (slots on
// the device, or registered host pages with host-registered weights, filled
// from the file while the steps run; the model map holds no routed expert)
// give the resident source's logits bit for bit on the GPU. One block's
// worth of slots makes every block evict the previous ones' experts, so
// slot writes are ordered against the kernels still reading the old bytes.
// Prefill whole (the grouped expert path) and in chunks of 3 (the device
// path), then 8 single-token steps.
void expect_cache_matches_resident(const cudatest::fs::path& path, bool host_weights) {
    const auto whole = ds4::test::load_whole_model(path.string());
    const auto loaded = ds4::test::load_without_experts(path.string());
    const auto& map = loaded.map;
    const auto& cached = loaded.model;
    const int64_t n_expert = cached->routed_experts().front().n_expert();
    std::mt19937_64 rng(ds4::test::test_seed());
    std::vector<int32_t> prompt(40 + rng() % 40);
    for (auto& t : prompt) t = int32_t(rng() % uint64_t(whole.model->info().n_vocab));
    for (const int64_t chunk : {int64_t(prompt.size()), int64_t(3), int64_t(1)}) {
        std::shared_ptr<ExpertCache> cache;  // outlives backend b, which registered its pages
        CudaBackend a(CudaOptions{0, host_weights}), b(CudaOptions{0, host_weights});
        a.attach_weights(*whole.map);
        b.attach_weights(*map);
        cache = std::make_shared<ExpertCache>(b, *map, cached->routed_experts(), n_expert);
        cached->set_expert_source(cache);
        const auto want = CudaModelFixture::run_prompt_logits(a, *whole.model, prompt, chunk);
        const auto got = CudaModelFixture::run_prompt_logits(b, *cached, prompt, chunk);
        EXPECT_EQ(got, want) << "chunk " << chunk << ": the cache's GPU logits differ from the resident source's";
        EXPECT_GT(cache->stats().misses, uint64_t(n_expert)) << "no block evicted another's experts";
        std::printf("  expert cache, %s, chunk %lld: %llu misses, %llu hits, identical: %s\n",
                    host_weights ? "host-registered" : "device", static_cast<long long>(chunk),
                    static_cast<unsigned long long>(cache->stats().misses),
                    static_cast<unsigned long long>(cache->stats().hits), got == want ? "yes" : "no");
        cached->set_expert_source(std::make_shared<ResidentExperts>());
    }
}

TEST_P(CudaModel, ExpertCacheMatchesResident) { expect_cache_matches_resident(make_model(GetParam()), false); }

// Expert windows (issue 11): every routed expert in page-locked host memory
// mapped into the device's address space at a window of its own, the most
// used remapped onto device slots between steps (the kernels keep their
// pointers, and the decode step is recorded and replayed). The logits are
// the resident source's bit for bit: at one slot, half the experts, all of
// them, and with a policy that reassigns the slots at every step (a slot
// mapped at the wrong window, or filled before the last step finished with
// it, would change them). Prefill whole, in chunks of 3 and of 1; decode op
// by op and replayed. A replayed step never calls the source, so its
// routing counts (and the promotions they drive) must come from the
// recorded count kernel: both paths must count the same lookups and make
// the same moves.
void expect_windows_match_resident(const cudatest::fs::path& path) {
    const auto whole = ds4::test::load_whole_model(path.string());
    const auto loaded = ds4::test::load_without_experts(path.string());
    const auto& map = loaded.map;
    const auto& windowed = loaded.model;
    int64_t total = 0;
    for (const RoutedExperts& b : windowed->routed_experts()) total += b.n_expert();
    std::mt19937_64 rng(ds4::test::test_seed());
    std::vector<int32_t> prompt(40 + rng() % 40);
    for (auto& t : prompt) t = int32_t(rng() % uint64_t(whole.model->info().n_vocab));
    CudaBackend a;
    a.attach_weights(*whole.map);
    for (const int64_t chunk : {int64_t(prompt.size()), int64_t(3), int64_t(1)}) {
        int64_t replayed = 0;
        const auto want = CudaModelFixture::run_prompt_logits(a, *whole.model, prompt, chunk);
        const auto want_replayed = CudaModelFixture::run_prompt_logits(a, *whole.model, prompt, chunk, &replayed);
        ASSERT_EQ(replayed, 8) << "the resident run's decode steps did not replay";
        for (const int64_t slots : {int64_t(1), total / 2, total, int64_t(-1)}) {
            ExpertWindowOptions wo;
            wo.device_slots = slots < 0 ? total / 2 : slots;
            if (slots < 0) {  // churn: any hotter window takes a slot, every step
                wo.policy.half_life_steps = 0;
                wo.policy.swap_ratio = 0;
                wo.policy.swap_margin = 0;
                wo.policy.swaps_per_step = 1 << 20;
            }
            const std::string what = "chunk " + std::to_string(chunk) + ", " + std::to_string(wo.device_slots) +
                                     " slots" + (slots < 0 ? " (churn)" : "");
            ExpertSourceStats st[2];
            for (const bool replay : {false, true}) {
                CudaBackend b;
                b.attach_weights(*map);
                auto source = std::make_shared<ExpertWindowSource>(b, *map, windowed->routed_experts(), wo);
                windowed->set_expert_source(source);
                int64_t n_replayed = 0;
                const auto got = CudaModelFixture::run_prompt_logits(b, *windowed, prompt, chunk,
                                                                     replay ? &n_replayed : nullptr);
                st[replay] = source->stats();
                windowed->set_expert_source(std::make_shared<ResidentExperts>());
                EXPECT_EQ(got, replay ? want_replayed : want)
                    << what << (replay ? ", decode replayed" : "") << ": the windows' GPU logits differ";
                if (replay) EXPECT_EQ(n_replayed, 8) << what << ": the windows' decode steps did not replay";
                std::printf("  expert windows, %s%s: %.0f%% on the device, %llu lookups, %llu promoted, %llu demoted, "
                            "identical: %s\n",
                            what.c_str(), replay ? ", decode replayed" : "",
                            100.0 * double(st[replay].hits) / double(std::max<uint64_t>(st[replay].lookups, 1)),
                            static_cast<unsigned long long>(st[replay].lookups),
                            static_cast<unsigned long long>(st[replay].promotions),
                            static_cast<unsigned long long>(st[replay].evictions),
                            got == (replay ? want_replayed : want) ? "yes" : "no");
            }
            EXPECT_GT(st[0].promotions, 0u) << what;
            EXPECT_EQ(st[0].lookups, st[0].hits + st[0].misses) << what;
            EXPECT_EQ(st[1].lookups, st[0].lookups) << what << ": replayed steps were not counted";
            EXPECT_EQ(st[1].hits, st[0].hits) << what;
            EXPECT_EQ(st[1].promotions, st[0].promotions) << what;
            EXPECT_EQ(st[1].evictions, st[0].evictions) << what;
            // With 8 or more experts per block a random router spreads its
            // choices; llama.cpp's 4-expert test file may keep to two.
            if (slots < 0 && total >= 8 * int64_t(windowed->routed_experts().size()))
                EXPECT_GT(st[0].evictions, 0u) << what << ": the churning policy never demoted a window";
        }
    }
}

TEST_P(CudaModel, ExpertWindowsMatchResident) { expect_windows_match_resident(make_model(GetParam())); }

TEST_F(CudaModel, ExpertCacheInHostRegisteredMemoryMatchesResident) {
    expect_cache_matches_resident(make_model("q8_0"), true);
}

// The bound must catch a small planted bug: the GPU runs a copy of the file
// with layer 0's FFN norm gains scaled by 1.01, the CPU the original.
// Prefill logits must then fail 1e-5. (One row of the query projection, the
// first choice, moved the logits by only 1.4e-5 to 2.4e-4 at 1% on these
// random weights: too close to the bound to rely on.)
TEST_F(CudaModel, PlantedWeightErrorFailsBound) {
    expect_planted_row_error_caught(make_model("f32"), "blk.0.ffn_norm.weight", 0, 30, 40);
}

// Batches on the GPU: 5 slots, more sequences than slots, steps mixing
// prefill chunks with decodes and all-decode steps (recorded once per row
// count and replayed), against each sequence alone on the CPU.
TEST_F(CudaModel, BatchedSequencesMatchCpuAlone) {
    const auto l = load(make_model("q8_0"));
    CudaBackend gpu(0);
    gpu.attach_weights(*l.map);
    auto cpu = make_cpu_backend(2);
    const int64_t V = l.model->info().n_vocab, n_ctx = 96;
    auto seqs = ds4::test::draw_sequences(rng_, 8, int32_t(V), 3, 60, 12);
    ds4::test::run_alone(*l.model, *cpu, seqs, n_ctx, &rng_);
    const auto batched = ds4::test::run_batched(*l.model, gpu, seqs, 5, n_ctx, 17, rng_);
    EXPECT_GT(batched.mixed_steps, 0);
    EXPECT_GT(batched.replayed, 0) << "no all-decode step was replayed";
    for (size_t i = 0; i < seqs.size(); ++i) {
        bool same = false;
        const double e = ds4::test::worst_rel_l2(batched.logits[i], seqs[i].logits, V, &same);
        EXPECT_GE(e, 0.0) << "sequence " << i << ": row counts differ";
        EXPECT_LE(e, cudatest::kExactBound) << "sequence " << i;
    }
    std::printf("  batched: %d passes (%d mixed, %lld replayed)\n", batched.steps, batched.mixed_steps,
                static_cast<long long>(batched.replayed));
}

// SlotPool::fork on the device (the server's shared system prompts): slot 1
// takes the first n positions slot 0 evaluated, a copy in device memory,
// and continues with its own tokens; its logits equal that whole sequence
// alone on the CPU, and slot 0 continues unharmed.
TEST_F(CudaModel, ForkedSlotMatchesCpuAlone) {
    const auto l = load(make_model("q8_0"));
    CudaBackend gpu(0);
    gpu.attach_weights(*l.map);
    auto cpu = make_cpu_backend(2);
    const int64_t V = l.model->info().n_vocab, n_ctx = 96;
    const auto shared = random_prompt(V, 20, 40);
    auto a = shared, b = shared;
    for (int32_t t : random_prompt(V, 3, 12)) a.push_back(t);
    for (int32_t t : random_prompt(V, 3, 12)) b.push_back(t);
    const std::span<const int32_t> b_rest(b.data() + shared.size(), b.size() - shared.size());
    SlotPool pool(*l.model, gpu, 2, n_ctx);
    const SeqStep first{0, a, false};
    pool.step(std::span<const SeqStep>(&first, 1));
    ASSERT_TRUE(pool.fork(0, 1, int64_t(shared.size())));
    EXPECT_EQ(pool.n_past(1), int64_t(shared.size()));
    const int32_t next_a = a.front();
    const SeqStep both[2] = {{1, b_rest, true}, {0, std::span<const int32_t>(&next_a, 1), false}};
    const auto got = pool.step(both);
    // The CPU alone: b whole, and a followed by next_a.
    auto run_cpu = [&](const std::vector<int32_t>& tokens, bool all) {
        SlotPool p(*l.model, *cpu, 1, n_ctx);
        const SeqStep s{0, tokens, all};
        return p.step(std::span<const SeqStep>(&s, 1))[0];
    };
    const auto want_b = run_cpu(b, true);
    const std::vector<float> want_rest(want_b.end() - std::ptrdiff_t(b_rest.size() * size_t(V)), want_b.end());
    auto a_next = a;
    a_next.push_back(next_a);
    bool same = false;
    const double eb = ds4::test::worst_rel_l2(got[0], want_rest, V, &same);
    EXPECT_GE(eb, 0.0) << "the forked slot returned " << got[0].size() / size_t(V) << " rows";
    EXPECT_LE(eb, cudatest::kExactBound) << "the forked slot";
    const double ea = ds4::test::worst_rel_l2(got[1], run_cpu(a_next, false), V, &same);
    EXPECT_LE(ea, cudatest::kExactBound) << "the slot forked from";
    std::printf("  fork at %zu: forked slot %.3g, source slot %.3g\n", shared.size(), eb, ea);
}

// Real shapes: Qwen3-30B-A3B (128 experts, 8 used, 32/4 heads, 2048-wide
// embeddings, 151,936 vocabulary) in Q4_K_M, truncated to 2 blocks, on a few
// hundred tokens. The tiny models above leave the wide-row and many-expert
// kernel paths unexercised.
TEST_F(CudaModel, RealShapeQwen3_30B_A3B_Q4KM) {
    const auto l = load(synth("--arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --n-layer 2", "q30b.gguf"));
    CudaBackend gpu(0);
    gpu.attach_weights(*l.map);
    compare_with_cpu(*l.model, gpu, random_prompt(l.model->info().n_vocab, 200, 300), 16, "qwen3-30b-a3b q4_k_m",
                     Decode::replayed_and_op_by_op);
}

// The int8-activation decode path (--int8-activations) on the real shapes,
// teacher-forced with the CPU's greedy tokens so both see the same context.
// Its per-product rule is held at 1e-5 by cudabackend_ops_test
// (CudaInt8Ops); here, what it adds up to. On a random MoE model one
// rounding can flip a routing choice (a different expert, ~1/8 of a layer's
// FFN output), so single steps jump: measured on the H200 (2026-12-02) the
// worst step of 31 was 0.08, 0.14 and 0.27 on three seeds, with 0 to 3
// greedy differences, all near-ties. So: the median step within 0.1 (a wrong
// scale or block is ~1 on every step), every greedy difference a near-tie,
// and the path really ran (the exact path measures ~1e-6). Issue 13 item 3
// turns this into a comparison with llama.cpp's own CUDA error.
TEST_F(CudaModel, Int8DecodeStaysCloseToCpuOnRealShapes) {
    const auto l = load(synth("--arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --n-layer 2", "q30b.gguf"));
    CudaBackend gpu(CudaOptions{0, false, true});
    gpu.attach_weights(*l.map);
    auto cpu = make_cpu_backend(2);
    const Model& m = *l.model;
    const int64_t V = m.info().n_vocab;
    const auto prompt = random_prompt(V, 100, 200);
    const int steps = 32;
    const int64_t ctx = int64_t(prompt.size()) + steps + 8;
    Session sc(m, *cpu, SessionOptions{ctx, 512});
    SessionOptions go{ctx, 512};
    go.replay_decode = true;
    Session sg(m, gpu, go);
    auto lc = sc.eval(prompt, false);
    auto lg = sg.eval(prompt, false);  // prefill: cuBLAS on float activations either way
    std::vector<double> errors;
    int differ = 0, excused = 0;
    for (int step = 0; step < steps; ++step) {
        const int32_t nc = int32_t(std::max_element(lc.begin(), lc.end()) - lc.begin());
        const int32_t ng = int32_t(std::max_element(lg.begin(), lg.end()) - lg.begin());
        if (step > 0) {  // step 0's logits came from the prefill
            errors.push_back(cudatest::rel_l2(lg.data(), lc.data(), size_t(V)));
            if (ng != nc) {
                ++differ;
                if (ds4::test::near_tie(lg.data(), lc.data(), size_t(V), size_t(ng), size_t(nc))) ++excused;
            }
        }
        lc = sc.eval(std::vector<int32_t>{nc}, false);
        lg = sg.eval(std::vector<int32_t>{nc}, false);
    }
    std::sort(errors.begin(), errors.end());
    const double median = errors[errors.size() / 2];
    std::printf("  int8 decode over %zu steps: relative error median %.3g, worst %.3g; %d greedy differences (%d near-ties)\n",
                errors.size(), median, errors.back(), differ, excused);
    EXPECT_LE(median, 0.1);
    EXPECT_GT(errors.back(), 1e-4) << "the decode steps were exact: the int8 path did not run";
    EXPECT_EQ(differ, excused) << "greedy tokens differed beyond near-ties";
    EXPECT_EQ(sg.decode_steps_replayed(), steps) << sg.decode_replay_refused();
}

// The tensor-core prefill on the real shapes (expect_f16_prefill_close).
TEST_F(CudaModel, F16PrefillStaysCloseToCpuOnRealShapes) {
    const auto l = load(synth("--arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --n-layer 2", "q30b.gguf"));
    expect_f16_prefill_close(l, 6, 100, 300, "qwen3-30b-a3b q4_k_m");
}

INSTANTIATE_TEST_SUITE_P(SyntheticQwen3Moe, CudaModel, ::testing::Values("f32", "q8_0", "q4_k_m"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ds4

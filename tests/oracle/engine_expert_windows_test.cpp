// Expert windows (issue 11): with --ssd-streaming-windows every routed expert
// sits in a window of its own, filled from the file at start (the model map
// holds no routed expert), and between steps the most used windows are
// promoted into a budget of slots: the window's pages then come from a slot
// holding a copy of its bytes (on the CPU a shared-memory mapping over the
// window, as CUDA maps device memory). Whatever backs the windows, the logits
// are the resident source's bit for bit, for every position of a chunked
// prefill and a greedy decode, at budgets of one slot, half the experts and
// all of them: a slot mapped at the wrong window, filled from another, or a
// scale read for the wrong expert changes them. The source counts routing
// on the backend; the stats add up and the budget is honoured. Models from
// llama.cpp's generator redrawn at realistic magnitudes (all three
// families), fresh seed each run.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "engine/session.h"
#include "experts/expert_windows.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/family.h"
#include "expert_source_run.h"
#include "oracle_harness.h"
#include "support/loaded_model.h"

namespace ds4 {
namespace {

using namespace oracle;

struct Run : GreedyRun {
    ExpertSourceStats stats;
    int64_t slots = 0, promoted = 0, windows = 0;
    bool windowed = false;
};

// device_slots < 0: the resident source.
Run run(const fs::path& model, int64_t device_slots, const std::vector<int32_t>& prompt, int64_t chunk, int n_decode) {
    EngineOptions o;
    o.model = model.string();
    o.backend.name = "cpu";
    o.backend.threads = 2;
    o.chat = false;
    if (device_slots >= 0) {
        o.ssd_streaming.enabled = true;
        o.ssd_streaming.windows = ExpertWindowsMode::on;
        o.ssd_streaming.experts = uint64_t(device_slots);
    }
    Run r;
    static_cast<GreedyRun&>(r) = greedy_run(o, prompt, chunk, n_decode, [&](const ds4::Engine& e) {
        if (const auto* w = dynamic_cast<const ExpertWindowSource*>(&e.model().expert_source())) {
            r.windowed = true;
            r.stats = w->stats();
            r.slots = w->device_slots();
            r.promoted = w->promoted();
            r.windows = w->windows();
        }
    });
    return r;
}

void expect_windows_equal_resident(const fs::path& model, std::mt19937_64& rng) {
    const auto file = GgufFile::open(model.string());
    const GgufSummary summary = read_gguf_summary(model);
    const auto prompt = random_token_ids(rng, 20 + rng() % 40, int32_t(summary.n_vocab));
    const int64_t chunk = 1 + int64_t(rng() % prompt.size());
    const int n_decode = 8;
    SCOPED_TRACE(std::to_string(prompt.size()) + " tokens in chunks of " + std::to_string(chunk));

    const Run want = run(model, -1, prompt, chunk, n_decode);
    ASSERT_FALSE(want.windowed);
    const int64_t n_expert = int64_t(*file->get_uint(file->architecture() + ".expert_count"));
    const int64_t total = n_expert * int64_t(summary.count_if_name([](const std::string& n) {
                              return n.ends_with(".ffn_gate_exps.weight");
                          }));
    for (const int64_t slots : {int64_t(1), total / 2, total}) {
        SCOPED_TRACE("expert windows with " + std::to_string(slots) + " device slots");
        const Run got = run(model, slots, prompt, chunk, n_decode);
        ASSERT_TRUE(got.windowed) << "--ssd-streaming-windows on did not give expert windows";
        EXPECT_FALSE(got.map_holds_an_expert) << "the model map holds routed experts beside the windows";
        EXPECT_EQ(got.windows, total);
        EXPECT_EQ(got.logits, want.logits) << "the windows' logits differ from the resident source's";
        EXPECT_EQ(got.generated, want.generated);
        EXPECT_EQ(got.slots, slots);
        EXPECT_LE(got.promoted, slots);
        EXPECT_GT(got.stats.promotions, 0u) << "no expert was ever promoted";
        EXPECT_EQ(got.stats.lookups, got.stats.hits + got.stats.misses);
        EXPECT_GT(got.stats.hits, 0u) << "no step read a promoted expert";
        // The first step promotes what it used; only a budget of every
        // expert has no misses after that.
        EXPECT_GT(got.stats.misses, 0u);
        std::printf("%s, %lld of %lld experts promotable: %llu lookups, %.0f%% promoted, %llu promotions, %llu "
                    "demotions\n",
                    file->architecture().c_str(), static_cast<long long>(slots), static_cast<long long>(total),
                    static_cast<unsigned long long>(got.stats.lookups),
                    100.0 * double(got.stats.hits) / double(std::max<uint64_t>(got.stats.lookups, 1)),
                    static_cast<unsigned long long>(got.stats.promotions),
                    static_cast<unsigned long long>(got.stats.evictions));
    }
}

TEST(ExpertWindows, EqualResidentQwen3MoeWithExpertScales) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    const fs::path m = generate_arch_model("qwen3moe", model_seed(seed), dir.path());
    ASSERT_TRUE(GgufFile::open(m.string())->find_tensor("blk.0.ffn_down_exps.scale"))
        << "the generator no longer writes per-expert scales; this case would not cover them";
    expect_windows_equal_resident(m, rng);
}

TEST(ExpertWindows, EqualResidentQwen3MoeRealistic) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    expect_windows_equal_resident(realistic_qwen3moe(dir.path(), model_seed(seed)), rng);
}

TEST(ExpertWindows, EqualResidentGlmDsa) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    expect_windows_equal_resident(realistic_glm_dsa(dir.path(), model_seed(seed)), rng);
}

TEST(ExpertWindows, EqualResidentDeepSeek4) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    expect_windows_equal_resident(realistic_deepseek4(dir.path(), model_seed(seed)), rng);
}

// A failed read while the windows are filled fails the open with the read's
// sentence (nothing runs on partial bytes).
TEST(ExpertWindows, FailedFillReadFailsTheOpen) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    TempDir dir;
    const fs::path m = realistic_qwen3moe(dir.path(), model_seed(seed));
    std::mt19937_64 rng(seed);
    setenv("DS4_TEST_FAIL_READ", std::to_string(1 + rng() % 3).c_str(), 1);
    EngineOptions o;
    o.model = m.string();
    o.backend.name = "cpu";
    o.backend.threads = 1;
    o.chat = false;
    o.ssd_streaming.enabled = true;
    o.ssd_streaming.windows = ExpertWindowsMode::on;
    o.ssd_streaming.experts = 1;
    try {
        (void)ds4::Engine::open(o);
        ADD_FAILURE() << "a failed read did not fail the open";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("DS4_TEST_FAIL_READ"), std::string::npos) << e.what();
    }
    unsetenv("DS4_TEST_FAIL_READ");
}

// The windows' backing changed at every step: a policy with no memory that
// swaps for any hotter window (every step promotes the experts it used
// into the slots of those it did not) through a session on the model
// itself. Slots are demoted and refilled with other windows all the time,
// the logits stay the resident ones bit for bit.
TEST(ExpertWindows, BackingChangedEveryStepKeepsTheLogits) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    const fs::path path = realistic_qwen3moe(dir.path(), model_seed(seed));
    const auto whole = ds4::test::load_whole_model(path.string());
    const auto loaded = ds4::test::load_without_experts(path.string());
    const auto& map = loaded.map;
    const auto& windowed = loaded.model;
    const auto prompt = random_token_ids(rng, 10 + rng() % 30, int32_t(whole.model->info().n_vocab));
    const int64_t chunk = 1 + int64_t(rng() % 4);
    CpuBackend a(2), b(2);
    ExpertWindowOptions wo;
    wo.device_slots = windowed->routed_experts().front().n_expert() / 2;
    wo.policy.half_life_steps = 0;
    wo.policy.swap_ratio = 0;
    wo.policy.swap_margin = 0;
    wo.policy.swaps_per_step = 1 << 20;
    auto source = std::make_shared<ExpertWindowSource>(b, *map, windowed->routed_experts(), wo);
    windowed->set_expert_source(source);
    auto logits = [&](Backend& be, const Model& m) {
        Session s(m, be, SessionOptions{int64_t(prompt.size()) + 17, chunk, false});
        std::vector<float> all = s.eval(prompt, true);
        const int64_t V = m.info().n_vocab;
        for (int i = 0; i < 16; ++i) {
            const float* last = all.data() + all.size() - size_t(V);
            const auto next = int32_t(std::max_element(last, last + V) - last);
            const auto l = s.eval(std::vector<int32_t>{next}, false);
            all.insert(all.end(), l.begin(), l.end());
        }
        return all;
    };
    const auto want = logits(a, *whole.model);
    const auto got = logits(b, *windowed);
    EXPECT_EQ(got, want) << "remapped windows changed the logits";
    const ExpertSourceStats st = source->stats();
    EXPECT_GT(st.evictions, 8u) << "the slots were hardly ever reassigned";
    std::printf("%llu promotions, %llu demotions over %zu prompt tokens in chunks of %lld and 16 decode steps\n",
                static_cast<unsigned long long>(st.promotions), static_cast<unsigned long long>(st.evictions),
                prompt.size(), static_cast<long long>(chunk));
}

}  // namespace
}  // namespace ds4

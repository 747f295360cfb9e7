// Whole-model logits of synthetic DeepSeek V4 files (`ds4-gguf synth --arch
// deepseek4 --preset tiny`, f32 and the published q2 / q4 quant mixes), CUDA
// against the CPU backend: prefill, chunked prefill (7 and 3) and 64 greedy
// decode steps within 1e-3 relative error per position, with the same
// tokens. Prompts of 200+ positions make every part of the attention work:
// the 32-position window wraps, ratio-4 blocks outnumber the indexer's
// top-k of 16 (from position 68), and ratio-128 blocks complete during the
// prefill (position 127) and during the decode (position 255).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "common/error.h"
#include "cuda_test_support.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/family.h"

namespace ds4 {
namespace {

namespace fs = std::filesystem;

int run(const std::string& cmd, std::string* out = nullptr) {
    FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
    if (!p) return -1;
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
    const int st = ::pclose(p);
    if (out) *out = text;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

fs::path bin_dir() {
    const char* b = std::getenv("DS4_BIN");
    return b && *b ? fs::path(b) : fs::path(DS4_BINARY_DIR);
}

struct Loaded {
    std::unique_ptr<GgufFile> file;
    std::unique_ptr<ModelMap> map;
    std::unique_ptr<Model> model;
};

// The step's tokens and positions, on the host and in the backend's memory.
StepInputs step(Backend& be, const int32_t* tokens, int64_t n, int64_t pos0) {
    StepInputs in;
    in.tokens = tokens;
    in.n = n;
    in.pos0 = pos0;
    in.token_ids = be.ints(tokens, n);
    std::vector<int32_t> pos(static_cast<size_t>(n));
    std::iota(pos.begin(), pos.end(), static_cast<int32_t>(pos0));
    in.positions = be.ints(pos.data(), n);
    return in;
}

class CudaDsv4Model : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        DS4_REQUIRE_CUDA_DEVICE();
        seed_ = cudatest::fresh_seed();
        rng_.seed(seed_);
        dir_ = fs::temp_directory_path() / ("ds4-cuda-dsv4-" + std::to_string(::getpid()) + "-" + std::to_string(seed_));
        fs::create_directories(dir_);
        trace_.emplace(__FILE__, __LINE__, "seed " + std::to_string(seed_) + ", files in " + dir_.string());
    }
    void TearDown() override {
        if (!dir_.empty() && !std::getenv("DS4_KEEP_TEMP")) fs::remove_all(dir_);
    }

    fs::path make_model(const std::string& quant) {
        const fs::path m = dir_ / ("deepseek4-tiny-" + quant + ".gguf");
        const std::string cmd = (bin_dir() / "ds4-gguf").string() +
                                " synth --arch deepseek4 --preset tiny --no-tokenizer --quant " + quant + " --seed " +
                                std::to_string(uint32_t(seed_ & 0x7fffffff)) + " --out " + m.string();
        std::string out;
        if (run(cmd, &out) != 0) throw Error("ds4-gguf synth failed: " + out);
        return m;
    }

    Loaded load(const fs::path& path) {
        Loaded l;
        l.file = GgufFile::open(path.string());
        l.map = ModelMap::build(*l.file, MapSelection{});
        l.model = load_model(*l.file, *l.map);
        return l;
    }

    std::vector<float> logits(Backend& be, const Tensor& t) {
        std::vector<float> v(size_t(t.size()));
        be.download(t, v.data());
        return v;
    }

    // Runs `tokens` in chunks of `chunk` and returns all positions' logits.
    std::vector<float> run_prompt(Backend& be, const Model& m, ModelState& st, const std::vector<int32_t>& tokens,
                                  int64_t chunk) {
        std::vector<float> all;
        for (int64_t p = 0; p < int64_t(tokens.size()); p += chunk) {
            const int64_t n = std::min<int64_t>(chunk, int64_t(tokens.size()) - p);
            const auto l = logits(be, m.forward(be, st, step(be, tokens.data() + p, n, p), true));
            all.insert(all.end(), l.begin(), l.end());
        }
        return all;
    }

    ::testing::AssertionResult per_position(const std::vector<float>& gpu, const std::vector<float>& cpu,
                                            int64_t n_vocab, const std::string& what) {
        if (gpu.size() != cpu.size()) return ::testing::AssertionFailure() << what << ": sizes differ";
        double worst = 0.0;
        for (size_t p = 0; p < cpu.size() / size_t(n_vocab); ++p) {
            const double e = cudatest::rel_l2(gpu.data() + p * n_vocab, cpu.data() + p * n_vocab, size_t(n_vocab));
            worst = std::max(worst, e);
            if (!(e <= 1e-3))
                return ::testing::AssertionFailure() << what << ": position " << p << " relative error " << e;
        }
        std::printf("  %s: worst relative error %.3g over %zu positions\n", what.c_str(), worst,
                    cpu.size() / size_t(n_vocab));
        return ::testing::AssertionSuccess();
    }

    uint64_t seed_ = 0;
    std::mt19937_64 rng_;
    fs::path dir_;
    std::optional<::testing::ScopedTrace> trace_;
};

TEST_P(CudaDsv4Model, LogitsAndGreedyTokensMatchCpu) {
    const Loaded l = load(make_model(GetParam()));
    const Model& m = *l.model;
    ASSERT_EQ(m.info().arch, "deepseek4");
    const int64_t n_vocab = m.info().n_vocab;
    auto cpu = make_cpu_backend(2);
    CudaBackend gpu(0);
    gpu.attach_weights(*l.map);

    std::uniform_int_distribution<int32_t> tok(0, int32_t(n_vocab - 1));
    std::uniform_int_distribution<int> len(200, 215);
    std::vector<int32_t> prompt(size_t(len(rng_)));
    for (auto& t : prompt) t = tok(rng_);
    const int64_t n_prompt = int64_t(prompt.size());
    const int64_t steps = 64;
    const int64_t ctx = n_prompt + steps + 8;

    // Prefill all at once (cuBLAS-sized batches), then in chunks of 7 and 3
    // (decode-sized matvec; windows, rings and compressor blocks across chunks).
    auto cpu_state = m.new_state(*cpu, ctx);
    const auto ref = run_prompt(*cpu, m, *cpu_state, prompt, n_prompt);
    std::unique_ptr<ModelState> gpu_state;
    std::vector<float> gpu_prefill;
    for (int64_t chunk : {n_prompt, int64_t(7), int64_t(3)}) {
        auto gs = m.new_state(gpu, ctx);
        const auto got = run_prompt(gpu, m, *gs, prompt, chunk);
        EXPECT_TRUE(per_position(got, ref, n_vocab, GetParam() + " prefill chunk " + std::to_string(chunk)));
        if (chunk == n_prompt) {
            gpu_state = std::move(gs);
            gpu_prefill = got;
        }
    }
    ASSERT_EQ(gpu_prefill.size(), ref.size());

    // Greedy decode from each backend's own prefill state, each feeding its
    // own argmax; the logits of every step must match too.
    std::vector<float> lc(ref.end() - n_vocab, ref.end()), lg(gpu_prefill.end() - n_vocab, gpu_prefill.end());
    std::vector<int32_t> tc, tg;
    std::vector<float> dc, dg;
    for (int64_t s = 0; s < steps; ++s) {
        dc.insert(dc.end(), lc.begin(), lc.end());
        dg.insert(dg.end(), lg.begin(), lg.end());
        const int32_t nc = int32_t(std::max_element(lc.begin(), lc.end()) - lc.begin());
        const int32_t ng = int32_t(std::max_element(lg.begin(), lg.end()) - lg.begin());
        tc.push_back(nc);
        tg.push_back(ng);
        const int64_t pos = n_prompt + s;
        lc = logits(*cpu, m.forward(*cpu, *cpu_state, step(*cpu, &nc, 1, pos), false));
        lg = logits(gpu, m.forward(gpu, *gpu_state, step(gpu, &ng, 1, pos), false));
    }
    EXPECT_TRUE(per_position(dg, dc, n_vocab, GetParam() + " decode"));
    EXPECT_EQ(tg, tc) << "greedy tokens over " << steps << " steps differ";
}

INSTANTIATE_TEST_SUITE_P(SyntheticDeepSeek4Tiny, CudaDsv4Model, ::testing::Values("f32", "q2", "q4"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ds4

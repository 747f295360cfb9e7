// Shared scaffolding of the whole-model CUDA tests: a fresh seed and temp
// folder per test, the ds4 tools (ds4-gguf synth), loading a file through
// the model map, and the comparison itself — a CUDA session against a CPU
// session on the same fresh prompt: prefill whole and in chunks of 7 and 3,
// then greedy decode with each session feeding its own argmax (recorded and
// replayed, and op by op, when the model allows recording), every
// position's logits within 1e-3 relative error and the same tokens (where
// the CPU's top two logits are too close for that bound to order them, the
// CPU's token stands for both and the step is counted as a near-tie).
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
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
#include "runtime/session.h"

namespace ds4::cudatest {

namespace fs = std::filesystem;

// Runs a shell command, its output (stdout and stderr) into *out.
inline int run(const std::string& cmd, std::string* out = nullptr) {
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

// Where ds4-gguf is: $DS4_BIN (a GPU machine's folder of carried binaries) or this build.
inline fs::path bin_dir() {
    const char* b = std::getenv("DS4_BIN");
    return b && *b ? fs::path(b) : fs::path(DS4_BINARY_DIR);
}

struct LoadedModel {
    std::unique_ptr<GgufFile> file;
    std::unique_ptr<ModelMap> map;
    std::unique_ptr<Model> model;
};

class CudaModelFixture : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        DS4_REQUIRE_CUDA_DEVICE();
        seed_ = fresh_seed();
        rng_.seed(seed_);
        dir_ = fs::temp_directory_path() / ("ds4-cuda-model-" + std::to_string(::getpid()) + "-" + std::to_string(seed_));
        fs::create_directories(dir_);
        trace_.emplace(__FILE__, __LINE__, "seed " + std::to_string(seed_) + ", files in " + dir_.string());
    }
    void TearDown() override {
        if (!dir_.empty() && !std::getenv("DS4_KEEP_TEMP")) fs::remove_all(dir_);
    }

    // `ds4-gguf synth ARGS --seed S --out DIR/NAME` (no tokenizer: token ids only).
    fs::path synth(const std::string& args, const std::string& name) {
        const fs::path m = dir_ / name;
        const std::string cmd = (bin_dir() / "ds4-gguf").string() + " synth " + args + " --no-tokenizer --seed " +
                                std::to_string(uint32_t(seed_ & 0x7fffffff)) + " --out " + m.string();
        std::string out;
        if (run(cmd, &out) != 0) throw Error("ds4-gguf synth failed: " + out);
        return m;
    }

    static LoadedModel load(const fs::path& path) {
        LoadedModel l;
        l.file = GgufFile::open(path.string());
        l.map = ModelMap::build(*l.file, MapSelection{});
        l.model = load_model(*l.file, *l.map);
        return l;
    }

    std::vector<int32_t> random_prompt(int64_t n_vocab, int min_len, int max_len) {
        std::uniform_int_distribution<int32_t> tok(0, int32_t(n_vocab - 1));
        std::uniform_int_distribution<int> len(min_len, max_len);
        std::vector<int32_t> prompt(size_t(len(rng_)));
        for (auto& t : prompt) t = tok(rng_);
        return prompt;
    }

    // Runs `tokens` in prefill chunks of `chunk` and returns all positions' logits.
    static std::vector<float> run_prompt(Backend& be, const Model& m, const std::vector<int32_t>& tokens, int64_t chunk,
                                         int64_t ctx) {
        Session s(m, be, SessionOptions{ctx, chunk});
        return s.eval(tokens, true);
    }

    static ::testing::AssertionResult per_position(const std::vector<float>& gpu, const std::vector<float>& cpu,
                                                   int64_t n_vocab, const std::string& what) {
        if (gpu.size() != cpu.size()) return ::testing::AssertionFailure() << what << ": sizes differ";
        double worst = 0.0;
        for (size_t p = 0; p < cpu.size() / size_t(n_vocab); ++p) {
            const double e = rel_l2(gpu.data() + p * n_vocab, cpu.data() + p * n_vocab, size_t(n_vocab));
            worst = std::max(worst, e);
            if (!(e <= 1e-3))
                return ::testing::AssertionFailure() << what << ": position " << p << " relative error " << e;
        }
        std::printf("  %s: worst relative error %.3g over %zu positions\n", what.c_str(), worst,
                    cpu.size() / size_t(n_vocab));
        return ::testing::AssertionSuccess();
    }

    // The whole comparison of the header comment, `steps` decode steps.
    void compare_with_cpu(const Model& m, Backend& gpu, const std::vector<int32_t>& prompt, int steps,
                          const std::string& what) {
        const int64_t n_vocab = m.info().n_vocab, n_prompt = int64_t(prompt.size());
        const int64_t ctx = n_prompt + steps + 8;
        auto cpu = make_cpu_backend(2);
        // Prefill all at once (cuBLAS-sized batches), in chunks of 7 and 3
        // (decode-sized kernels against earlier chunks' caches).
        const auto ref = run_prompt(*cpu, m, prompt, n_prompt, ctx);
        for (int64_t chunk : {n_prompt, int64_t(7), int64_t(3)})
            EXPECT_TRUE(per_position(run_prompt(gpu, m, prompt, chunk, ctx), ref, n_vocab,
                                     what + " prefill chunk " + std::to_string(chunk)));
        std::vector<bool> modes{false};
        if (m.replayable_decode() && gpu.can_capture()) modes.insert(modes.begin(), true);
        for (bool replay : modes) {
            Session sc(m, *cpu, SessionOptions{ctx, 512});
            SessionOptions go{ctx, 512};
            go.replay_decode = replay;
            Session sg(m, gpu, go);
            auto lc = sc.eval(prompt, false);
            auto lg = sg.eval(prompt, false);
            std::vector<int32_t> tc, tg;
            std::vector<float> dc, dg;
            size_t near_ties = 0;
            for (int step = 0; step < steps; ++step) {
                dc.insert(dc.end(), lc.begin(), lc.end());
                dg.insert(dg.end(), lg.begin(), lg.end());
                const int32_t nc = int32_t(std::max_element(lc.begin(), lc.end()) - lc.begin());
                int32_t ng = int32_t(std::max_element(lg.begin(), lg.end()) - lg.begin());
                // Random weights now and then give two tokens logits closer
                // than the 1e-3 bound allows telling apart (the most two
                // logits can move against each other is 2e-3 * ||row||):
                // there the CPU's choice stands for both.
                if (ng != nc && double(lc[size_t(nc)]) - double(lc[size_t(ng)]) <=
                                    2e-3 * std::sqrt(squared_norm(lc))) {
                    ++near_ties;
                    ng = nc;
                }
                tc.push_back(nc);
                tg.push_back(ng);
                // Otherwise each session continues with its own choice, so a wrong
                // token would show as diverging logits from then on.
                lc = sc.eval(std::vector<int32_t>{nc}, false);
                lg = sg.eval(std::vector<int32_t>{ng}, false);
            }
            const std::string how = replay ? " decode (recorded step replayed)" : " decode (op by op)";
            EXPECT_TRUE(per_position(dg, dc, n_vocab, what + how));
            EXPECT_EQ(tg, tc) << "greedy tokens over " << steps << " steps differ," << how;
            if (near_ties) std::printf("  %s:%s %zu near-tie steps took the CPU's token\n", what.c_str(), how.c_str(), near_ties);
        }
    }

    static double squared_norm(const std::vector<float>& v) {
        double s = 0;
        for (float x : v) s += double(x) * x;
        return s;
    }

    uint64_t seed_ = 0;
    std::mt19937_64 rng_;
    fs::path dir_;
    std::optional<::testing::ScopedTrace> trace_;
};

}  // namespace ds4::cudatest

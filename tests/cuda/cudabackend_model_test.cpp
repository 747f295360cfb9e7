// Whole-model logits of synthetic Qwen3-MoE files, CUDA against the CPU
// backend: prefill, chunked prefill and decode within 1e-3 relative error
// per position, and the same greedy tokens over 64 steps. Models are made
// fresh each run: `ds4-gguf synth` (f32, q8_0) and llama.cpp's
// test-llama-archs + llama-quantize Q4_K_M (K-quants with q5_0/q8_0
// fallbacks). DS4_CUDA_TEST_Q4KM names a ready Q4_K_M file instead, for GPU
// machines without the llama.cpp tools.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
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
#include "runtime/session.h"
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

class CudaModel : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        DS4_REQUIRE_CUDA_DEVICE();
        seed_ = cudatest::fresh_seed();
        rng_.seed(seed_);
        dir_ = fs::temp_directory_path() / ("ds4-cuda-model-" + std::to_string(::getpid()) + "-" + std::to_string(seed_));
        fs::create_directories(dir_);
        trace_.emplace(__FILE__, __LINE__, "seed " + std::to_string(seed_) + ", files in " + dir_.string());
    }
    void TearDown() override {
        if (!dir_.empty() && !std::getenv("DS4_KEEP_TEMP")) fs::remove_all(dir_);
    }

    fs::path make_model(const std::string& kind) {
        const uint32_t s = uint32_t(seed_ & 0x7fffffff);
        std::string out;
        if (kind == "q4_k_m") {
            if (const char* f = std::getenv("DS4_CUDA_TEST_Q4KM"); f && *f) return f;
            const fs::path bin = fs::path(DS4_ORACLE_DIR) / "bin", lib = fs::path(DS4_ORACLE_DIR) / "lib";
            const std::string env = "LD_LIBRARY_PATH=" + lib.string() + " ";
            const std::string gen = env + (bin / "test-llama-archs").string() + " -a '^(qwen3moe)$' -s " +
                                    std::to_string(s) + " -o " + dir_.string();
            if (run(gen, &out) != 0) throw Error("test-llama-archs failed (set DS4_CUDA_TEST_Q4KM?): " + out);
            const fs::path q = dir_ / "q4km.gguf";
            if (run(env + (bin / "llama-quantize").string() + " " + (dir_ / "qwen3moe-moe.gguf").string() + " " +
                        q.string() + " Q4_K_M 2",
                    &out) != 0)
                throw Error("llama-quantize failed: " + out);
            return q;
        }
        const fs::path m = dir_ / (kind + ".gguf");
        const std::string cmd = (bin_dir() / "ds4-gguf").string() + " synth --arch qwen3moe --no-tokenizer --preset tiny --type " +
                                kind + " --seed " + std::to_string(s) + " --out " + m.string();
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

    // Runs `tokens` in prefill chunks of `chunk` and returns all positions' logits.
    std::vector<float> run_prompt(Backend& be, const Model& m, const std::vector<int32_t>& tokens, int64_t chunk,
                                  int64_t ctx) {
        Session s(m, be, SessionOptions{ctx, chunk});
        return s.eval(tokens, true);
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

TEST_P(CudaModel, LogitsAndGreedyTokensMatchCpu) {
    const Loaded l = load(make_model(GetParam()));
    const Model& m = *l.model;
    const int64_t n_vocab = m.info().n_vocab;
    auto cpu = make_cpu_backend(2);
    CudaBackend gpu(0);
    gpu.attach_weights(*l.map);
    EXPECT_GT(gpu.resident_bytes(), 0u);

    std::uniform_int_distribution<int32_t> tok(0, int32_t(n_vocab - 1));
    std::uniform_int_distribution<int> len(20, 40);
    std::vector<int32_t> prompt(size_t(len(rng_)));
    for (auto& t : prompt) t = tok(rng_);
    const int64_t ctx = int64_t(prompt.size()) + 80;

    // Prefill (all at once; cuBLAS path), chunked prefill (chunks of 7 and 3:
    // decode-sized matvec and attention against earlier chunks).
    const auto ref = run_prompt(*cpu, m, prompt, int64_t(prompt.size()), ctx);
    for (int64_t chunk : {int64_t(prompt.size()), int64_t(7), int64_t(3)})
        EXPECT_TRUE(per_position(run_prompt(gpu, m, prompt, chunk, ctx), ref, n_vocab,
                                 GetParam() + " prefill chunk " + std::to_string(chunk)));

    // Greedy decode, 64 steps, each session feeding its own argmax; the
    // logits of every step must match too. On the GPU once with the decode
    // step recorded as a CUDA graph and replayed, once op by op.
    for (bool replay : {true, false}) {
        Session sc(m, *cpu, SessionOptions{ctx, 512});
        SessionOptions go{ctx, 512};
        go.replay_decode = replay;
        Session sg(m, gpu, go);
        auto lc = sc.eval(prompt, false);
        auto lg = sg.eval(prompt, false);
        std::vector<int32_t> tc, tg;
        std::vector<float> dc, dg;
        for (int step = 0; step < 64; ++step) {
            dc.insert(dc.end(), lc.begin(), lc.end());
            dg.insert(dg.end(), lg.begin(), lg.end());
            const int32_t nc = int32_t(std::max_element(lc.begin(), lc.end()) - lc.begin());
            const int32_t ng = int32_t(std::max_element(lg.begin(), lg.end()) - lg.begin());
            tc.push_back(nc);
            tg.push_back(ng);
            lc = sc.eval(std::vector<int32_t>{nc}, false);
            lg = sg.eval(std::vector<int32_t>{ng}, false);
        }
        const std::string how = replay ? " decode (recorded step replayed)" : " decode (op by op)";
        EXPECT_TRUE(per_position(dg, dc, n_vocab, GetParam() + how));
        EXPECT_EQ(tg, tc) << "greedy tokens over 64 steps differ," << how;
    }
}

// --cuda-host-weights: the kernels read the mapped file through a host
// registration instead of a device copy; the numbers must not change.
TEST_F(CudaModel, HostRegisteredWeightsMatchCpu) {
    const Loaded l = load(make_model("q8_0"));
    const Model& m = *l.model;
    const int64_t n_vocab = m.info().n_vocab;
    auto cpu = make_cpu_backend(2);
    CudaBackend gpu(CudaOptions{0, true});
    gpu.attach_weights(*l.map);
    std::uniform_int_distribution<int32_t> tok(0, int32_t(n_vocab - 1));
    std::vector<int32_t> prompt(17);
    for (auto& t : prompt) t = tok(rng_);
    const int64_t ctx = 64;
    EXPECT_TRUE(per_position(run_prompt(gpu, m, prompt, 5, ctx), run_prompt(*cpu, m, prompt, 17, ctx), n_vocab,
                             "host-registered weights, prefill chunk 5"));
    Session sc(m, *cpu, SessionOptions{ctx, 512}), sg(m, gpu, SessionOptions{ctx, 512});
    auto lc = sc.eval(prompt, false), lg = sg.eval(prompt, false);
    std::vector<float> dc, dg;
    for (int step = 0; step < 8; ++step) {
        const int32_t nc = int32_t(std::max_element(lc.begin(), lc.end()) - lc.begin());
        lc = sc.eval(std::vector<int32_t>{nc}, false);
        lg = sg.eval(std::vector<int32_t>{nc}, false);
        dc.insert(dc.end(), lc.begin(), lc.end());
        dg.insert(dg.end(), lg.begin(), lg.end());
    }
    EXPECT_TRUE(per_position(dg, dc, n_vocab, "host-registered weights, recorded decode steps"));
}

INSTANTIATE_TEST_SUITE_P(SyntheticQwen3Moe, CudaModel, ::testing::Values("f32", "q8_0", "q4_k_m"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ds4

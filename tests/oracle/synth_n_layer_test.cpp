// `ds4-gguf synth --n-layer N`: a truncated model of a preset's shape with
// only its first N blocks, judged by llama.cpp (not our code):
//  - ggml's gguf reader sees block_count N, the blocks 0..N-1 and no others,
//    and for deepseek4 every per-layer array sized for N (compress_ratios
//    N + the trailing MTP entry, both SwiGLU clamp arrays N) and
//    min(preset's, N) hash-routed layers;
//  - llama.cpp's library loads it as an N-layer model (llama_model_n_layer)
//    and evaluates fresh random tokens to finite logits;
//  - ds4's loader (GgufFile, ModelMap, load_model) takes it as N layers, and
//    ds4's CPU logits match llama.cpp's within the F32 bar of the other
//    synth oracle tests (rel L2 <= 1e-4 per position, same argmax).
// qwen3moe tiny at N = 2; deepseek4 tiny (schedule {0, 0, 4, 128, 4}) at
// N = 4 (dense, ratio 4 and ratio 128 layers, scored routing in the last)
// with prompts long enough to pass the window and fill ratio-128 blocks, and
// at N = 2 (two dense hash-routed layers).
//
// llama.cpp cannot evaluate a deepseek4 model without both a ratio-4 and a
// ratio-128 layer: creating a context divides by zero (SIGFPE in
// llama_kv_cache::build_input_k_rot, `n_embd_head_k_all % nrot` for its empty
// CSA/HCA/indexer cache). So at N = 2 (and 1, 3) llama.cpp only loads the
// file (all tensors, n_layer 2), and ds4's logits are checked for being
// finite and varied; the comparison is at N = 4, the smallest truncation
// llama.cpp runs. Fresh seed and token ids each run.
#include <ggml-backend.h>
#include <gguf.h>
#include <llama.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/family.h"
#include "oracle_ggml_ptr.h"
#include "oracle_harness.h"
#include "oracle_llama_greedy.h"
#include "synth/deepseek4.h"
#include "synth/qwen3moe.h"

namespace ds4::oracle {
namespace {

// What ggml's own GGUF reader sees in the file.
struct FileFacts {
    uint32_t block_count = 0;
    std::set<int> blocks;                   // N of every blk.N. tensor
    size_t hash_tables = 0;                 // blk.*.ffn_gate_tid2eid.weight
    std::vector<int32_t> compress_ratios;   // deepseek4 only
    size_t clamp_exp = 0, clamp_shexp = 0;  // deepseek4 array lengths
    std::optional<uint32_t> hash_layer_count;
};

FileFacts read_facts(const fs::path& path, const std::string& arch) {
    ggml_context* meta = nullptr;
    gguf_init_params params{/*no_alloc=*/true, &meta};
    GgufPtr g(gguf_init_from_file(path.c_str(), params));
    GgmlPtr meta_owner(meta);
    if (!g) throw std::runtime_error("ggml cannot read GGUF file " + path.string());
    FileFacts f;
    auto key = [&](const std::string& k) { return gguf_find_key(g.get(), (arch + "." + k).c_str()); };
    const int64_t bc = key("block_count");
    if (bc < 0) throw std::runtime_error(path.string() + " has no block_count");
    f.block_count = gguf_get_val_u32(g.get(), bc);
    for (int64_t i = 0; i < gguf_get_n_tensors(g.get()); ++i) {
        const std::string name = gguf_get_tensor_name(g.get(), i);
        if (name.rfind("blk.", 0) == 0) f.blocks.insert(std::stoi(name.substr(4)));
        if (name.find("ffn_gate_tid2eid") != std::string::npos) ++f.hash_tables;
    }
    if (const int64_t k = key("attention.compress_ratios"); k >= 0) {
        const auto* d = static_cast<const int32_t*>(gguf_get_arr_data(g.get(), k));
        f.compress_ratios.assign(d, d + gguf_get_arr_n(g.get(), k));
    }
    if (const int64_t k = key("swiglu_clamp_exp"); k >= 0) f.clamp_exp = gguf_get_arr_n(g.get(), k);
    if (const int64_t k = key("swiglu_clamp_shexp"); k >= 0) f.clamp_shexp = gguf_get_arr_n(g.get(), k);
    if (const int64_t k = key("hash_layer_count"); k >= 0) f.hash_layer_count = gguf_get_val_u32(g.get(), k);
    return f;
}

// llama.cpp's library loads the whole file (every tensor it expects, no
// extra ones) and reports its layer count.
int32_t llama_layer_count(const fs::path& path) {
    llama_oracle_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model* model = llama_model_load_from_file(path.c_str(), mp);
    if (model == nullptr) throw std::runtime_error("llama.cpp could not load " + path.string());
    const int32_t n = llama_model_n_layer(model);
    llama_model_free(model);
    return n;
}

// ds4's loader: the model map over the whole file, then the family.
int ds4_layer_count(const fs::path& path) {
    const auto file = GgufFile::open(path.string());
    const auto map = ModelMap::build(*file, MapSelection{});
    const auto model = load_model(*file, *map);
    return model->info().n_layer;
}

void expect_finite_and_varied(const Logits& l, const char* engine) {
    for (size_t r = 0; r < l.n_tokens; ++r) {
        const float* row = l.row(r);
        ASSERT_TRUE(std::all_of(row, row + l.n_vocab, [](float x) { return std::isfinite(x); }))
            << engine << " logits row " << r << " is not finite";
        const auto [lo, hi] = std::minmax_element(row, row + l.n_vocab);
        EXPECT_GT(*hi - *lo, 1e-3f) << engine << " logits row " << r << " is constant";
    }
}

class SynthNLayer : public ::testing::Test {
protected:
    void SetUp() override {
        seed_ = fresh_seed();
        rng_.seed(seed_);
        trace_.emplace(__FILE__, __LINE__,
                       ds4::test::seed_note(seed_) + " (DS4_KEEP_TEMP=1 keeps " + dir_.path().string() + ")");
    }

    fs::path synth(const std::string& arch, int n_layer) {
        const fs::path out = dir_ / (arch + "-" + std::to_string(n_layer) + ".gguf");
        run_checked({ds4_program("ds4-gguf").string(), "synth", "--arch", arch, "--preset", "tiny", "--n-layer",
                     std::to_string(n_layer), "--seed", std::to_string(seed_), "--out", out.string()});
        return out;
    }

    std::vector<int32_t> prompt(const fs::path& m, size_t min_tokens, size_t max_tokens) {
        const size_t n_vocab = size_t(read_gguf_summary(m).n_vocab);
        std::uniform_int_distribution<size_t> len(min_tokens, max_tokens);
        return random_token_ids(rng_, len(rng_), int32_t(n_vocab));
    }

    // llama.cpp and ds4 on the same fresh tokens: llama.cpp finite, ds4 equal.
    void expect_llama_and_ds4_agree(const fs::path& m, size_t min_tokens, size_t max_tokens) {
        const size_t n_vocab = size_t(read_gguf_summary(m).n_vocab);
        const auto [ids, ref] = clearly_decided_reference(m, prompt(m, min_tokens, max_tokens), n_vocab, dir_.path(), rng_);
        SCOPED_TRACE(std::to_string(ids.size()) + " tokens: " + join_ids(ids));
        expect_finite_and_varied(ref, "llama.cpp");
        const Logits ours = engine_logits(Engine::ds4, m, ids, n_vocab, dir_.path());
        EXPECT_TRUE(logits_match(ours, ref, kF32Tolerance, "ds4 vs llama.cpp on " + m.filename().string()));
    }

    // Where llama.cpp cannot run the file (see the top): ds4 alone.
    void expect_ds4_finite(const fs::path& m, size_t min_tokens, size_t max_tokens) {
        const size_t n_vocab = size_t(read_gguf_summary(m).n_vocab);
        const auto ids = prompt(m, min_tokens, max_tokens);
        SCOPED_TRACE(std::to_string(ids.size()) + " tokens: " + join_ids(ids));
        expect_finite_and_varied(engine_logits(Engine::ds4, m, ids, n_vocab, dir_.path()), "ds4");
    }

    TempDir dir_;
    uint64_t seed_ = 0;
    std::mt19937_64 rng_;
    std::optional<::testing::ScopedTrace> trace_;
};

// Whether llama.cpp can evaluate a model of these first n ratios.
bool has_both_compressed_kinds(const std::vector<int32_t>& ratios, int n) {
    auto has = [&](int32_t r) { return std::find(ratios.begin(), ratios.begin() + n, r) != ratios.begin() + n; };
    return has(4) && has(128);
}

std::set<int> first_blocks(int n) {
    std::set<int> s;
    for (int i = 0; i < n; ++i) s.insert(i);
    return s;
}

TEST_F(SynthNLayer, Qwen3MoeTinyTwoLayers) {
    constexpr int kN = 2;
    ASSERT_LT(kN, int(qwen3moe_preset("tiny").n_layer)) << "the preset must be longer than the truncation";
    const fs::path m = synth("qwen3moe", kN);
    const FileFacts f = read_facts(m, "qwen3moe");
    EXPECT_EQ(f.block_count, uint32_t(kN));
    EXPECT_EQ(f.blocks, first_blocks(kN));
    EXPECT_EQ(llama_layer_count(m), kN);
    EXPECT_EQ(ds4_layer_count(m), kN);
    expect_llama_and_ds4_agree(m, 20, 60);
}

class SynthNLayerDeepseek4 : public SynthNLayer, public ::testing::WithParamInterface<int> {};

TEST_P(SynthNLayerDeepseek4, TinyTruncated) {
    const int n = GetParam();
    const Deepseek4Shape full = deepseek4_preset("tiny");
    ASSERT_LT(n, int(full.n_layer)) << "the preset must be longer than the truncation";
    const fs::path m = synth("deepseek4", n);
    const FileFacts f = read_facts(m, "deepseek4");
    EXPECT_EQ(f.block_count, uint32_t(n));
    EXPECT_EQ(f.blocks, first_blocks(n));
    // The preset's first n ratios, then what it carries past its last block
    // (the MTP entry), so the array stays one longer than block_count.
    std::vector<int32_t> want(full.compress_ratios.begin(), full.compress_ratios.begin() + n);
    want.insert(want.end(), full.compress_ratios.begin() + full.n_layer, full.compress_ratios.end());
    EXPECT_EQ(f.compress_ratios, want);
    EXPECT_EQ(f.compress_ratios.size(), size_t(n) + 1);
    EXPECT_EQ(f.clamp_exp, size_t(n));
    EXPECT_EQ(f.clamp_shexp, size_t(n));
    ASSERT_EQ(n >= 4, has_both_compressed_kinds(want, n)) << "the cases below are chosen for tiny's schedule";
    const uint32_t hash = std::min(full.n_hash_layers, uint32_t(n));
    EXPECT_EQ(f.hash_layer_count, std::optional<uint32_t>(hash));
    EXPECT_EQ(f.hash_tables, size_t(hash));
    EXPECT_EQ(llama_layer_count(m), n);
    EXPECT_EQ(ds4_layer_count(m), n);
    if (has_both_compressed_kinds(want, n)) {
        // Past the 32-position window, past one or two whole ratio-128
        // blocks, and more ratio-4 blocks than the indexer's top-k 16.
        expect_llama_and_ds4_agree(m, 140, 270);
    } else {
        expect_ds4_finite(m, 40, 80);
    }
}

INSTANTIATE_TEST_SUITE_P(Layers, SynthNLayerDeepseek4, ::testing::Values(2, 4));

}  // namespace
}  // namespace ds4::oracle

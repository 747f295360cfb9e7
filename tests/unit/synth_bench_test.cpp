// ds4-bench's synthetic models: preset names, --layers (ds4's parser, its
// inclusive A:B and N:output made half-open), the in-memory build
// (memfd) against the same synth written to a real file, layer-slice
// generation, and the weights-per-decoded-token count against a formula
// from the model's shape. Fresh seeds each run (printed on failure).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/layer_range.h"
#include "support/host_batch.h"
#include "common/error.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/family.h"
#include "synth/bench_preset.h"
#include "synth/decode_traffic.h"
#include "synth/memory_file.h"
#include "support/test_seed.h"

namespace {

namespace fs = std::filesystem;
using ds4::LayerRange;

uint64_t fresh_seed() { return ds4::test::test_seed(); }

struct TempFile {
    fs::path path;
    explicit TempFile(const std::string& stem) {
        path = fs::temp_directory_path() / (stem + "-" + std::to_string(::getpid()) + "-" + std::to_string(fresh_seed()) + ".gguf");
    }
    ~TempFile() {
        std::error_code ec;
        fs::remove(path, ec);
    }
};

std::string usage_message(const std::function<void()>& f) {
    try {
        f();
    } catch (const ds4::UsageError& e) {
        return e.what();
    }
    return "";
}

TEST(SynthPreset, EveryNameParsesToItsShape) {
    const auto names = ds4::synthetic_preset_names();
    for (const char* want : {"qwen3-30b-a3b-q4_k_m", "qwen3-30b-a3b-q8_0", "qwen3-30b-a3b-f16", "qwen3-235b-a22b-q4_k_m",
                             "qwen3-235b-a22b-q8_0", "deepseek4-flash-q2", "deepseek4-flash-q4", "deepseek4-pro-q2",
                             "deepseek4-pro-q4", "qwen3moe-tiny-f32", "deepseek4-tiny-f32"})
        EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
    for (const auto& n : names) EXPECT_EQ(ds4::synthetic_preset(n).name, n);
    EXPECT_EQ(ds4::synthetic_preset("qwen3-235b-a22b-q4_k_m").n_layer, 94);
    EXPECT_EQ(ds4::synthetic_preset("qwen3-235b-a22b-q4_k_m").type, "q4_k_m");
    EXPECT_EQ(ds4::synthetic_preset("qwen3-30b-a3b-q8_0").n_layer, 48);
    EXPECT_EQ(ds4::synthetic_preset("qwen3-30b-a3b-q8_0").type, "q8_0");
    EXPECT_EQ(ds4::synthetic_preset("deepseek4-flash-q2").n_layer, 43);
    EXPECT_EQ(ds4::synthetic_preset("deepseek4-flash-q2").quant, "q2");
    EXPECT_EQ(ds4::synthetic_preset("deepseek4-pro-q4").n_layer, 61);
    EXPECT_EQ(ds4::synthetic_preset("deepseek4-pro-q4").arch, "deepseek4");
}

TEST(SynthPreset, UnknownNameIsOneLineListingTheValidOnes) {
    for (const char* bad : {"", "qwen3-30b-a3b", "deepseek4-flash-q3", "QWEN3-30B-A3B-Q8_0", "tiny"}) {
        const std::string msg = usage_message([&] { ds4::synthetic_preset(bad); });
        ASSERT_FALSE(msg.empty()) << "'" << bad << "' was accepted";
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
        for (const auto& n : ds4::synthetic_preset_names()) EXPECT_NE(msg.find(n), std::string::npos) << msg;
    }
}

// ds4-bench's --layers goes through the ds4 program's parser; A:B is both
// inclusive, so the blocks run are [A, B + 1), and N:output is [N, n_layer).
ds4::LayerRange bench_range(const std::string& text, int n_layer) {
    return ds4::check_layers_flag(ds4::parse_layer_range(text), n_layer);
}

TEST(SynthLayers, ParsedSpecBecomesTheHalfOpenBlockRange) {
    EXPECT_EQ(bench_range("2:2", 4).begin, 2);
    EXPECT_EQ(bench_range("2:2", 4).end, 3);  // one block
    EXPECT_EQ(bench_range("0:3", 4).begin, 0);
    EXPECT_EQ(bench_range("0:3", 4).end, 4);  // the whole model
    EXPECT_EQ(bench_range("1:output", 4).begin, 1);
    EXPECT_EQ(bench_range("1:output", 4).end, 4);
    EXPECT_EQ(bench_range("3:output", 4).begin, 3);
    EXPECT_EQ(bench_range("3:output", 4).end, 4);
    EXPECT_EQ(bench_range("30:output", 43).end, 43);
    EXPECT_EQ(bench_range("0:29", 43).end, 30);

    // Random slices of a random model, against the definition.
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 200; ++i) {
        const int n = 1 + static_cast<int>(rng() % 100);
        const int a = static_cast<int>(rng() % static_cast<uint64_t>(n));
        const int b = a + static_cast<int>(rng() % static_cast<uint64_t>(n - a));
        const std::string text = std::to_string(a) + ":" + std::to_string(b);
        const ds4::LayerRange r = bench_range(text, n);
        EXPECT_EQ(r.begin, a) << text << " of " << n;
        EXPECT_EQ(r.end, b + 1) << text << " of " << n;
        const ds4::LayerRange tail = bench_range(std::to_string(a) + ":output", n);
        EXPECT_EQ(tail.begin, a) << a << ":output of " << n;
        EXPECT_EQ(tail.end, n) << a << ":output of " << n;
        EXPECT_EQ(ds4::parse_layer_range(text).spelling(), text);
    }
}

TEST(SynthLayers, BadSlicesAreOneSentence) {
    for (const char* bad : {"", "3", "a:b", "3:1", "-1:3", "1:2:3", " 1:2", "1:", ":2", "1:2x", "1:out",
                            "99999999999:99999999999", "1.5:3", "output:3"}) {
        const std::string msg = usage_message([&] { bench_range(bad, 4); });
        ASSERT_FALSE(msg.empty()) << "'" << bad << "' was accepted";
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
    // Outside the model: the sentence names its layer count.
    for (const char* outside : {"0:4", "0:9", "4:4", "4:output", "40:47"}) {
        const std::string msg = usage_message([&] { bench_range(outside, 4); });
        EXPECT_NE(msg.find("4 layers"), std::string::npos) << outside << ": " << msg;
    }
    // A range made by hand, not by the parser, is refused as well.
    EXPECT_FALSE(usage_message([&] { ds4::check_layers_flag(ds4::LayerRange{3, 2}, 4); }).empty());
    EXPECT_FALSE(usage_message([&] { ds4::check_layers_flag(ds4::LayerRange{-1, 2}, 4); }).empty());
}

TEST(SynthLayers, AllLayersIsSpelledInclusive) {
    EXPECT_EQ((ds4::LayerRange{0, 4}).spelling(), "0:3");
    EXPECT_EQ(bench_range((ds4::LayerRange{0, 43}).spelling(), 43).end, 43);
    EXPECT_EQ(ds4::LayerRange::all().spelling(43), "0:output");
}

// Logits of every position of `tokens` from a model file (by path).
std::vector<float> logits_of(const std::string& path, const std::vector<int32_t>& tokens) {
    auto file = ds4::GgufFile::open(path);
    auto map = ds4::ModelMap::build(*file, ds4::MapSelection{});
    auto model = ds4::load_model(*file, *map);
    auto backend = ds4::make_cpu_backend(2);
    backend->attach_weights(*map);
    const int64_t n = static_cast<int64_t>(tokens.size());
    auto state = model->new_state(*backend, n + 1);
    const auto in = ds4::test::sequence_batch(*backend, tokens, 0, n + 1, /*all_logits=*/true);
    ds4::Tensor t = model->forward(*backend, *state, in.batch);
    std::vector<float> out(static_cast<size_t>(t.size()));
    backend->download(t, out.data());
    return out;
}

std::vector<uint8_t> read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

class SynthInMemory : public ::testing::TestWithParam<const char*> {};

// The memfd model runs, and it is the same model as the file: identical
// bytes and identical logits (a different seed gives different logits, so
// the comparison can fail).
TEST_P(SynthInMemory, SameModelAsTheFile) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(std::string("preset ") + GetParam() + ", " + ds4::test::seed_note(seed));
    const ds4::SyntheticPreset p = ds4::synthetic_preset(GetParam());
    const LayerRange all{0, p.n_layer};
    auto mem = ds4::MemoryModelFile::build(p, seed, all);
    EXPECT_EQ(mem->path().rfind("/proc/self/fd/", 0), 0u) << mem->path();
    struct stat st{};
    ASSERT_EQ(::stat(mem->path().c_str(), &st), 0);
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), mem->bytes());

    TempFile file("ds4-synth-bench");
    ds4::write_synthetic_model(p, seed, all, file.path.string());
    EXPECT_TRUE(read_all(mem->path()) == read_all(file.path.string())) << "memfd and file bytes differ";

    std::mt19937_64 rng(seed);
    auto probe = ds4::GgufFile::open(mem->path());
    const int64_t n_vocab = probe->require_tensor("token_embd.weight").ne[1];
    std::vector<int32_t> tokens(5);
    for (auto& t : tokens) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(n_vocab));
    const auto from_mem = logits_of(mem->path(), tokens);
    const auto from_file = logits_of(file.path.string(), tokens);
    ASSERT_EQ(from_mem.size(), tokens.size() * static_cast<size_t>(n_vocab));
    for (float x : from_mem) ASSERT_TRUE(std::isfinite(x));
    EXPECT_TRUE(from_mem == from_file) << "logits of the memfd model differ from the file's";

    auto other = ds4::MemoryModelFile::build(p, seed ^ 0x5555, all);
    EXPECT_FALSE(logits_of(other->path(), tokens) == from_mem) << "another seed gave the same logits";
}

INSTANTIATE_TEST_SUITE_P(TinyPresets, SynthInMemory, ::testing::Values("qwen3moe-tiny-f32", "deepseek4-tiny-f32"));

// --layers 1:2 builds only blocks [1, 3) plus the rest, same bytes as the
// full model's, block_count unchanged.
TEST(SynthInMemorySlice, BuildsOnlyTheSliceWithTheFullModelsBytes) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    const ds4::SyntheticPreset p = ds4::synthetic_preset("qwen3moe-tiny-f32");
    auto full = ds4::MemoryModelFile::build(p, seed, {0, p.n_layer});
    auto part = ds4::MemoryModelFile::build(p, seed, bench_range("1:2", p.n_layer));
    auto ff = ds4::GgufFile::open(full->path());
    auto pf = ds4::GgufFile::open(part->path());
    EXPECT_EQ(pf->require_uint("qwen3moe.block_count"), static_cast<uint64_t>(p.n_layer));
    auto fmap = ds4::ModelMap::build(*ff, ds4::MapSelection{});
    auto pmap = ds4::ModelMap::build(*pf, ds4::MapSelection{});
    size_t in_slice = 0;
    for (const auto& t : ff->tensors()) {
        const int layer = ds4::tensor_layer(t.name);
        const ds4::GgufTensorInfo* pt = pf->find_tensor(t.name);
        if (layer >= 0 && (layer < 1 || layer >= 3)) {
            EXPECT_EQ(pt, nullptr) << t.name << " is outside 1:2 but was built";
            continue;
        }
        ASSERT_NE(pt, nullptr) << t.name << " is missing";
        in_slice += layer >= 0;
        ASSERT_EQ(pt->nbytes, t.nbytes);
        EXPECT_EQ(std::memcmp(pmap->tensor_data(*pt), fmap->tensor_data(t), t.nbytes), 0) << t.name;
    }
    EXPECT_GT(in_slice, 0u);
    EXPECT_LT(part->bytes(), full->bytes());
}

// The count from the tensor table against one from the shape (qwen3moe
// tiny: E 64, 4 query heads and 2 KV heads of 32, 8 experts of 64, 2 used,
// F32, vocabulary 151,936) for a random slice.
TEST(SynthDecodeTraffic, MatchesTheShapeFormula) {
    const uint64_t seed = fresh_seed();
    std::mt19937_64 rng(seed);
    const int a = static_cast<int>(rng() % 4), b = a + 1 + static_cast<int>(rng() % (4 - a));
    SCOPED_TRACE(ds4::test::seed_note(seed) + ", blocks [" + std::to_string(a) + ", " + std::to_string(b) + ")");
    auto mem = ds4::MemoryModelFile::build(ds4::synthetic_preset("qwen3moe-tiny-f32"), seed, {0, 4});
    auto f = ds4::GgufFile::open(mem->path());
    const ds4::DecodeWeightBytes d = ds4::decode_weight_bytes(*f, a, b);
    const double E = 64, Q = 128, KV = 64, D = 32, X = 8, F = 64, V = 151936, used = 2;
    const double per_layer_other = 4 * (E + E * Q + 2 * E * KV + Q * E + 2 * D + E + E * X);
    const double per_layer_routed = 4 * 3 * E * F * X * used / X;
    EXPECT_EQ(d.embedding_row, 4 * E);
    EXPECT_EQ(d.output_head, 4 * (E + E * V));
    EXPECT_EQ(d.layers_other, (b - a) * per_layer_other);
    EXPECT_DOUBLE_EQ(d.routed_experts, (b - a) * per_layer_routed);
    EXPECT_DOUBLE_EQ(d.total, 4 * E + 4 * (E + E * V) + (b - a) * (per_layer_other + per_layer_routed));
}

}  // namespace

// The fuzz seed corpus (tests/fuzz/corpus/fuzz_gguf): small valid GGUFs with
// metadata arrays (nested too) and tensors of several types. This test checks
// the committed files are still valid, small GGUFs, and regenerates them into
// the build dir (DS4_WRITE_FUZZ_CORPUS=1 writes them into the source tree).
// They are named *.seed, not *.gguf, which .gitignore keeps out of git.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "gguf_random_content.h"

namespace ds4 {
namespace {

namespace fs = std::filesystem;

// Fixed seeds: a seed corpus is a starting point for mutation, not a test
// expectation, and it should not churn in git.
std::vector<std::pair<std::string, std::vector<uint8_t>>> make_corpus() {
    std::vector<std::pair<std::string, std::vector<uint8_t>>> out;
    {
        GgufWriter w;
        out.emplace_back("empty.seed", w.to_bytes());
    }
    {
        GgufWriter w;
        w.set("general.architecture", GgufValue::string("qwen3moe"));
        w.set("qwen3moe.block_count", GgufValue::u32(2));
        w.set("qwen3moe.rope.freq_base", GgufValue::f32(1e6f));
        w.set("tokenizer.ggml.tokens", GgufValue::string_array({"<s>", "a", "b", "ab", "\xe4\xb8\xad"}));
        w.set("tokenizer.ggml.scores", GgufValue::float_array(GgufValueType::F32, {0, -1, -2, -3, -4}));
        w.set("tokenizer.ggml.token_type", GgufValue::int_array(GgufValueType::I32, {3, 1, 1, 1, 1}));
        w.set("general.flag", GgufValue::boolean(true));
        std::vector<uint8_t> f32(4 * 8 * 2), q8(34 * 2), q4k(144);
        for (size_t i = 0; i < f32.size(); ++i) f32[i] = static_cast<uint8_t>(i * 7);
        w.add_tensor_bytes("token_embd.weight", GgmlType::F32, {8, 2}, f32);
        w.add_tensor_bytes("blk.0.attn_q.weight", GgmlType::Q8_0, {32, 2}, q8);
        w.add_tensor_bytes("blk.0.ffn_down_exps.weight", GgmlType::Q4_K, {256, 1, 1}, q4k);
        w.add_tensor_bytes("blk.0.empty", GgmlType::F16, {0}, {});
        out.emplace_back("model_like.seed", w.to_bytes());
    }
    std::mt19937_64 rng(20260101);
    for (int i = 0; i < 6; ++i) {
        testing::RandomOptions o;
        o.max_kv = 8;
        o.max_tensors = 4;
        testing::RandomGguf g = testing::random_gguf(rng, o);
        if (i == 5) g.alignment = 8;
        auto bytes = testing::make_writer(g).to_bytes();
        if (bytes.size() > 6000) continue;  // keep seeds small
        if (i == 4) bytes[4] = 2;            // a version-2 file (same layout)
        out.emplace_back("random" + std::to_string(i) + ".seed", std::move(bytes));
    }
    return out;
}

TEST(GgufFuzzCorpus, CommittedSeedsAreSmallValidFiles) {
    const fs::path dir = fs::path(DS4_SOURCE_DIR) / "tests/fuzz/corpus/fuzz_gguf";
    int n = 0, with_tensors = 0, with_arrays = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
        SCOPED_TRACE(e.path().string());
        ++n;
        EXPECT_LE(fs::file_size(e.path()), 8192u);
        auto f = GgufFile::open(e.path().string());
        with_tensors += !f->tensors().empty();
        for (const auto& [k, v] : f->metadata()) with_arrays += v.type == GgufValueType::ARRAY;
    }
    EXPECT_GE(n, 5);
    EXPECT_GE(with_tensors, 3);
    EXPECT_GE(with_arrays, 3);
}

TEST(GgufFuzzCorpus, Regenerate) {
    const auto corpus = make_corpus();
    ASSERT_GE(corpus.size(), 5u);
    std::vector<fs::path> dirs = {fs::path(DS4_BINARY_DIR) / "fuzz_corpus/fuzz_gguf"};
    if (const char* w = std::getenv("DS4_WRITE_FUZZ_CORPUS"); w && *w == '1')
        dirs.push_back(fs::path(DS4_SOURCE_DIR) / "tests/fuzz/corpus/fuzz_gguf");
    for (const auto& dir : dirs) {
        fs::create_directories(dir);
        for (const auto& [name, bytes] : corpus) {
            auto f = GgufFile::parse(bytes.data(), bytes.size(), name);
            std::ofstream(dir / name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                              static_cast<std::streamsize>(bytes.size()));
        }
    }
}

}  // namespace
}  // namespace ds4

// check_tensor_values (--check-tensors) over every type ds4 computes with:
// random but finite tensors pass; one NaN or infinity planted in an element
// (plain types) or in a block's f16 scale (block types) is reported with the
// tensor, the lowest bad row and its first bad column, whatever the thread
// count; tensors outside the selection and integer tables are not read.
// DS4_TEST_SEED fixes the draws; the seed is printed with every failure.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "mapping/model_map.h"
#include "models/check_tensors.h"
#include "quant/block_layouts.h"
#include "quant/block_layouts_fallback.h"
#include "quant/quant.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

namespace fs = std::filesystem;

uint64_t test_seed() { return ds4::test::process_seed(); }

// Where a block type keeps its f16 scales (d, and dmin or m where it has one).
std::vector<size_t> half_fields(GgmlType t) {
    switch (t) {
        case GgmlType::Q8_0: return {offsetof(BlockQ8_0, d)};
        case GgmlType::Q4_0: return {offsetof(BlockQ4_0, d)};
        case GgmlType::Q4_1: return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
        case GgmlType::Q5_0: return {offsetof(BlockQ5_0, d)};
        case GgmlType::Q5_1: return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
        case GgmlType::IQ4_NL: return {offsetof(BlockIQ4NL, d)};
        case GgmlType::Q2_K: return {offsetof(BlockQ2K, d), offsetof(BlockQ2K, dmin)};
        case GgmlType::Q3_K: return {offsetof(BlockQ3K, d)};
        case GgmlType::Q4_K: return {offsetof(BlockQ4K, d), offsetof(BlockQ4K, dmin)};
        case GgmlType::Q5_K: return {offsetof(BlockQ5K, d), offsetof(BlockQ5K, dmin)};
        case GgmlType::Q6_K: return {offsetof(BlockQ6K, d)};
        case GgmlType::IQ2_XXS: return {offsetof(BlockIQ2XXS, d)};
        case GgmlType::IQ4_XS: return {offsetof(BlockIQ4XS, d)};
        default: return {};
    }
}

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,   GgmlType::Q4_0,
                           GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::Q2_K,
                           GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,   GgmlType::IQ2_XXS,
                           GgmlType::IQ4_XS};

void put_half(uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); }

// Random finite values: plain types from floats in [-2, 2]; block types
// random bytes with every f16 scale set to a finite value.
std::vector<uint8_t> finite_bytes(GgmlType type, int64_t n_elems, std::mt19937_64& rng) {
    const auto& tr = ggml_type_traits(type);
    std::vector<uint8_t> b(static_cast<size_t>(n_elems / tr.block_elems) * tr.block_bytes);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    if (tr.block_elems == 1) {
        std::vector<float> v(static_cast<size_t>(n_elems));
        for (float& x : v) x = u(rng);
        quantize_row(type, v.data(), b.data(), n_elems);
        return b;
    }
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    for (size_t blk = 0; blk < b.size(); blk += tr.block_bytes)
        for (size_t off : half_fields(type)) put_half(&b[blk + off], fp32_to_fp16(u(rng) * 0.01f));
    return b;
}

// Makes element `col` of row `row` (or, for a block type, the whole block
// holding it, through its scale) NaN or an infinity.
void plant(GgmlType type, std::vector<uint8_t>& b, int64_t n_per_row, int64_t row, int64_t col, int kind) {
    const auto& tr = ggml_type_traits(type);
    const size_t row_bytes = ggml_row_bytes(type, n_per_row);
    uint8_t* r = b.data() + static_cast<size_t>(row) * row_bytes;
    const uint16_t half[] = {0x7E00, 0x7C00, 0xFC00};  // NaN, +inf, -inf
    if (type == GgmlType::F32) {
        const uint32_t bits[] = {0x7FC00000u, 0x7F800000u, 0xFF800000u};
        std::memcpy(r + 4 * col, &bits[kind], 4);
    } else if (type == GgmlType::F16) {
        put_half(r + 2 * col, half[kind]);
    } else if (type == GgmlType::BF16) {
        const uint16_t bf[] = {0x7FC0, 0x7F80, 0xFF80};
        put_half(r + 2 * col, bf[kind]);
    } else {
        const auto fields = half_fields(type);
        put_half(r + static_cast<size_t>(col / tr.block_elems) * tr.block_bytes + fields[kind % fields.size()],
                 half[kind]);
    }
}

class CheckTensors : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("ds4_check_tensors_" + std::to_string(::getpid()));
        fs::create_directories(dir_);
        rng_.seed(test_seed());
    }
    void TearDown() override { fs::remove_all(dir_); }

    // Writes the tensors, maps the file and checks `sel`; returns the error
    // sentence, or "" when every value is finite.
    std::string check(const GgufWriter& w, const MapSelection& sel, int threads, TensorCheckStats* stats = nullptr) {
        const fs::path path = dir_ / "m.gguf";
        w.write(path.string());
        auto file = GgufFile::open(path.string());
        auto map = ModelMap::build(*file, sel);
        try {
            const TensorCheckStats s = check_tensor_values(*file, *map, sel, threads);
            if (stats) *stats = s;
        } catch (const Error& e) {
            return e.what();
        }
        return "";
    }

    std::string note() const { return ds4::test::seed_note(test_seed()); }

    fs::path dir_;
    std::mt19937_64 rng_;
};

TEST_F(CheckTensors, EveryTypeFindsTheFirstBadRowAndColumn) {
    for (GgmlType type : kTypes) {
        const std::string tname(ggml_type_name(type));
        SCOPED_TRACE(tname + ", " + note());
        const int64_t n = 512, rows = 5 + static_cast<int64_t>(rng_() % 40);
        const std::vector<uint8_t> clean = finite_bytes(type, n * rows, rng_);
        const int threads = 1 + static_cast<int>(rng_() % 4);

        GgufWriter ok;
        ok.add_tensor_bytes("blk.0.attn_q.weight", type, {n, rows}, clean);
        TensorCheckStats stats;
        EXPECT_EQ(check(ok, MapSelection{}, threads, &stats), "");
        EXPECT_EQ(stats.tensors, 1u);
        EXPECT_EQ(stats.bytes, clean.size());

        // Two bad rows: the lower one is reported, at its first bad column.
        const int64_t block = ggml_type_traits(type).block_elems;
        const int64_t r1 = static_cast<int64_t>(rng_() % rows), r2 = static_cast<int64_t>(rng_() % rows);
        const int64_t c1 = static_cast<int64_t>(rng_() % n), c2 = static_cast<int64_t>(rng_() % n);
        const int kind = static_cast<int>(rng_() % 3);
        std::vector<uint8_t> bad = clean;
        plant(type, bad, n, r1, c1, kind);
        plant(type, bad, n, r2, c2, static_cast<int>(rng_() % 3));
        const int64_t row = std::min(r1, r2);
        const int64_t col = (r1 == r2 ? std::min(c1, c2) : row == r1 ? c1 : c2) / block * block;
        GgufWriter w;
        w.add_tensor_bytes("token_embd.weight", GgmlType::F32, {8, 4}, finite_bytes(GgmlType::F32, 32, rng_));
        w.add_tensor_bytes("blk.0.attn_q.weight", type, {n, rows}, bad);
        const std::string msg = check(w, MapSelection{}, threads);
        EXPECT_NE(msg.find("m.gguf: tensor 'blk.0.attn_q.weight' holds "), std::string::npos) << msg;
        EXPECT_NE(msg.find(" in row " + std::to_string(row) + ", column " + std::to_string(col) + " "),
                  std::string::npos)
            << msg;
        if (block == 1 && r1 < r2)  // an element keeps its own value; a block's scale spreads to all of it
            EXPECT_NE(msg.find(kind == 0 ? "NaN" : kind == 1 ? "+inf" : "-inf"), std::string::npos) << msg;
    }
}

TEST_F(CheckTensors, ExpertTensorsNameTheMatrix) {
    const int64_t n = 32, rows = 6, experts = 4;
    std::vector<uint8_t> b = finite_bytes(GgmlType::Q8_0, n * rows * experts, rng_);
    const int64_t e = static_cast<int64_t>(rng_() % experts), r = static_cast<int64_t>(rng_() % rows);
    plant(GgmlType::Q8_0, b, n, e * rows + r, 0, 0);
    GgufWriter w;
    w.add_tensor_bytes("blk.3.ffn_up_exps.weight", GgmlType::Q8_0, {n, rows, experts}, b);
    const std::string msg = check(w, MapSelection{}, 2);
    EXPECT_NE(msg.find("'blk.3.ffn_up_exps.weight' holds NaN in row " + std::to_string(e * rows + r) + " (matrix " +
                       std::to_string(e) + ", its row " + std::to_string(r) + "), column 0"),
              std::string::npos)
        << msg << ", " << note();
}

// Only what the process uses is read: tensors of other layers, and integer
// tables (whose bits may look like anything), are left alone.
TEST_F(CheckTensors, OnlySelectedFloatTensorsAreRead) {
    std::vector<uint8_t> bad = finite_bytes(GgmlType::F32, 64, rng_);
    plant(GgmlType::F32, bad, 8, 3, 5, 0);
    std::vector<uint8_t> table(64 * 4);
    for (size_t i = 0; i < table.size(); i += 4) std::memcpy(&table[i], "\x00\x00\xc0\x7f", 4);  // NaN's bits
    GgufWriter w;
    w.add_tensor_bytes("token_embd.weight", GgmlType::F32, {8, 8}, finite_bytes(GgmlType::F32, 64, rng_));
    w.add_tensor_bytes("blk.0.ffn_gate_tid2eid.weight", GgmlType::I32, {4, 16}, table);
    w.add_tensor_bytes("blk.1.attn_q.weight", GgmlType::F32, {8, 8}, bad);
    MapSelection first;
    first.layers.begin = 0;
    first.layers.end = 1;
    TensorCheckStats stats;
    EXPECT_EQ(check(w, first, 2, &stats), "") << note();
    EXPECT_EQ(stats.tensors, 1u);  // the embedding
    MapSelection second;
    second.layers.begin = 1;
    EXPECT_NE(check(w, second, 2).find("'blk.1.attn_q.weight' holds NaN in row 3, column 5"), std::string::npos)
        << note();
}

}  // namespace
}  // namespace ds4

// GgufWriter -> GgufFile round trips with random content (fresh seed each
// run), the writer's layout rules, and the writer's own errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "gguf_random_content.h"

namespace ds4 {
namespace {

using testing::RandomGguf;

std::string temp_path(const std::string& stem) {
    return (std::filesystem::temp_directory_path() / (stem + "." + std::to_string(::getpid()) + ".gguf")).string();
}

std::vector<uint8_t> slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Checks every key, value, tensor info and tensor byte of `f` against `g`.
void expect_matches(const RandomGguf& g, const GgufFile& f, const std::vector<uint8_t>& bytes) {
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.alignment(), g.alignment);
    EXPECT_EQ(f.data_offset() % g.alignment, 0u);
    const GgufValue* al = f.find("general.alignment");
    EXPECT_EQ(al != nullptr, g.alignment != 32) << "general.alignment is written exactly when it is not 32";
    if (al) EXPECT_EQ(static_cast<uint64_t>(al->i), g.alignment);

    const size_t extra = al ? 1 : 0;
    ASSERT_EQ(f.metadata().size(), g.kv.size() + extra);
    for (size_t k = 0; k < g.kv.size(); ++k) {
        // The alignment key comes first when the writer added it.
        const auto& [key, v] = f.metadata()[k + extra];
        EXPECT_EQ(key, g.kv[k].first);
        EXPECT_EQ(testing::value_difference(g.kv[k].second, v), "") << "key " << key;
        const GgufValue* found = f.find(g.kv[k].first);
        ASSERT_NE(found, nullptr);
        EXPECT_EQ(found, &v);
    }

    ASSERT_EQ(f.tensors().size(), g.tensors.size());
    uint64_t expect_offset = 0;
    for (size_t i = 0; i < g.tensors.size(); ++i) {
        const auto& want = g.tensors[i];
        const auto& got = f.tensors()[i];
        SCOPED_TRACE("tensor " + want.name);
        EXPECT_EQ(got.name, want.name);
        EXPECT_EQ(got.type, want.type);
        EXPECT_EQ(got.n_dims, want.ne.size());
        for (int d = 0; d < kGgufMaxDims; ++d)
            EXPECT_EQ(got.ne[d], d < static_cast<int>(want.ne.size()) ? want.ne[d] : 1);
        EXPECT_EQ(got.nbytes, want.bytes.size());
        EXPECT_EQ(got.offset, expect_offset) << "tensors are packed in order, each padded to the alignment";
        EXPECT_EQ(got.file_offset, f.data_offset() + got.offset);
        EXPECT_EQ(got.file_offset % g.alignment, 0u);
        ASSERT_LE(got.file_offset + got.nbytes, bytes.size());
        EXPECT_TRUE(std::equal(want.bytes.begin(), want.bytes.end(), bytes.begin() + got.file_offset));
        EXPECT_EQ(f.find_tensor(want.name), &got);
        expect_offset += (want.bytes.size() + g.alignment - 1) / g.alignment * g.alignment;
    }
    // Padding is zero and the file ends on the alignment, as ggml writes it.
    EXPECT_EQ(bytes.size(), f.data_offset() + expect_offset);
    EXPECT_EQ(bytes.size() % g.alignment, 0u);
}

TEST(GgufRoundTrip, RandomContentInMemoryAndOnDisk) {
    const uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const std::string path = temp_path("gguf_roundtrip");
    for (int round = 0; round < 60; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        const RandomGguf g = testing::random_gguf(rng);
        const GgufWriter w = testing::make_writer(g);
        const std::vector<uint8_t> bytes = w.to_bytes();
        EXPECT_EQ(bytes.size(), w.file_size());
        auto f = GgufFile::parse(bytes.data(), bytes.size(), "mem.gguf");
        expect_matches(g, *f, bytes);

        if (round % 6 == 0) {
            w.write(path);
            const auto disk = slurp(path);
            EXPECT_EQ(disk, bytes) << "write() and to_bytes() give the same file";
            auto fd = GgufFile::open(path);
            EXPECT_EQ(fd->path(), path);
            expect_matches(g, *fd, disk);
        }
    }
    std::filesystem::remove(path);
}

TEST(GgufRoundTrip, EveryScalarTypeAtItsLimits) {
    GgufWriter w;
    auto put = [&](const char* k, GgufValueType t, int64_t i) {
        GgufValue v;
        v.type = t;
        v.i = i;
        w.set(k, v);
    };
    put("u8", GgufValueType::U8, 255);
    put("i8", GgufValueType::I8, -128);
    put("u16", GgufValueType::U16, 65535);
    put("i16", GgufValueType::I16, -32768);
    put("u32", GgufValueType::U32, 4294967295ll);
    put("i32", GgufValueType::I32, -2147483648ll);
    put("u64", GgufValueType::U64, -1);  // bit pattern of 2^64-1
    put("i64", GgufValueType::I64, std::numeric_limits<int64_t>::min());
    put("bool", GgufValueType::BOOL, 1);
    w.set("f32", GgufValue::f32(-3.5f));
    GgufValue f64;
    f64.type = GgufValueType::F64;
    f64.f = 1e300;
    w.set("f64", f64);
    w.set("str", GgufValue::string(std::string("a\0b", 3)));
    const auto bytes = w.to_bytes();
    auto f = GgufFile::parse(bytes.data(), bytes.size(), "limits.gguf");
    EXPECT_EQ(f->get_uint("u8"), 255u);
    EXPECT_EQ(f->get_int("i8"), -128);
    EXPECT_EQ(f->get_uint("u16"), 65535u);
    EXPECT_EQ(f->get_int("i16"), -32768);
    EXPECT_EQ(f->get_uint("u32"), 4294967295u);
    EXPECT_EQ(f->get_int("i32"), -2147483648ll);
    EXPECT_EQ(f->get_uint("u64"), std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(f->get_int("i64"), std::numeric_limits<int64_t>::min());
    EXPECT_EQ(f->get_bool("bool"), true);
    EXPECT_EQ(f->get_float("f32"), -3.5);
    EXPECT_EQ(f->get_float("f64"), 1e300);
    EXPECT_EQ(f->get_string("str"), std::string("a\0b", 3));
}

TEST(GgufRoundTrip, NestedArraysThreeDeep) {
    GgufValue inner1 = GgufValue::int_array(GgufValueType::I16, {-1, 2, -3});
    GgufValue inner2 = GgufValue::string_array({"x", "", "yz"});
    GgufValue mid;
    mid.type = GgufValueType::ARRAY;
    mid.elem_type = GgufValueType::ARRAY;
    mid.arrays = {inner1, inner2, GgufValue::float_array(GgufValueType::F64, {})};
    GgufValue outer;
    outer.type = GgufValueType::ARRAY;
    outer.elem_type = GgufValueType::ARRAY;
    outer.arrays = {mid, mid};
    GgufWriter w;
    w.set("nested", outer);
    const auto bytes = w.to_bytes();
    auto f = GgufFile::parse(bytes.data(), bytes.size(), "nested.gguf");
    const GgufValue& got = f->require_array("nested");
    EXPECT_EQ(testing::value_difference(outer, got), "");
    ASSERT_EQ(got.arrays.size(), 2u);
    ASSERT_EQ(got.arrays[1].arrays.size(), 3u);
    EXPECT_EQ(got.arrays[1].arrays[1].strings[2], "yz");
}

TEST(GgufRoundTrip, SetReplacesInPlaceAndAlignmentKeyDrivesLayout) {
    GgufWriter w;
    w.set("a", GgufValue::u32(1));
    w.set("b", GgufValue::u32(2));
    w.set("a", GgufValue::string("one"));
    w.set("general.alignment", GgufValue::u32(64));
    w.add_tensor_bytes("t", GgmlType::F32, {3}, std::vector<uint8_t>(12, 7));
    const auto bytes = w.to_bytes();
    auto f = GgufFile::parse(bytes.data(), bytes.size(), "set.gguf");
    ASSERT_EQ(f->metadata().size(), 3u);
    EXPECT_EQ(f->metadata()[0].first, "a");
    EXPECT_EQ(f->get_string("a"), "one");
    EXPECT_EQ(f->alignment(), 64u);
    EXPECT_EQ(f->data_offset() % 64, 0u);
    EXPECT_EQ(bytes.size() % 64, 0u);
}

TEST(GgufRoundTrip, StreamedTensorLargerThanOneChunk) {
    const uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    // 2.5 chunks of f16, so the callback sees a full, full, and partial chunk.
    const int64_t n = static_cast<int64_t>(GgufWriter::kStreamChunkBytes * 5 / 4);
    GgufWriter w(4096);
    auto pattern = [seed](uint64_t i) { return static_cast<uint8_t>((i * 2654435761u + seed) >> 7); };
    std::vector<std::pair<uint64_t, size_t>> calls;
    w.add_tensor_streamed("big", GgmlType::F16, {n}, [&](uint64_t off, uint8_t* dst, size_t len) {
        calls.emplace_back(off, len);
        for (size_t i = 0; i < len; ++i) dst[i] = pattern(off + i);
    });
    w.add_tensor("small", GgmlType::Q8_0, {64, 2}, [&](uint8_t* dst, size_t len) {
        EXPECT_EQ(len, 4u * 34u);
        std::memset(dst, 0xab, len);
    });
    const std::string path = temp_path("gguf_streamed");
    w.write(path);
    ASSERT_EQ(calls.size(), 3u);
    EXPECT_EQ(calls[0], std::make_pair(uint64_t{0}, GgufWriter::kStreamChunkBytes));
    EXPECT_EQ(calls[2].first + calls[2].second, static_cast<uint64_t>(n) * 2);
    auto f = GgufFile::open(path);
    const auto& big = f->require_tensor("big");
    EXPECT_EQ(big.nbytes, static_cast<uint64_t>(n) * 2);
    const auto disk = slurp(path);
    EXPECT_EQ(disk.size(), w.file_size());
    for (uint64_t i = 0; i < big.nbytes; i += 4093) ASSERT_EQ(disk[big.file_offset + i], pattern(i)) << i;
    EXPECT_EQ(disk[f->require_tensor("small").file_offset], 0xab);
    std::filesystem::remove(path);
}

void expect_error(const std::function<void()>& fn, const std::string& needle) {
    try {
        fn();
        ADD_FAILURE() << "no ds4::Error; expected one mentioning '" << needle << "'";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

TEST(GgufWriterErrors, OneSentenceNamingTheProblem) {
    expect_error([] { GgufWriter w(48); }, "power of two");
    expect_error([] { GgufWriter w(0); }, "power of two");
    expect_error([] { GgufWriter w; w.set("general.alignment", GgufValue::u64(64)); }, "must be u32");
    expect_error([] { GgufWriter w; w.set("", GgufValue::u32(1)); }, "empty");
    expect_error([] {
        GgufValue v; v.type = GgufValueType::U8; v.i = 256;
        GgufWriter w; w.set("k", v);
    }, "out of range for u8");
    expect_error([] {
        GgufValue v; v.type = GgufValueType::BOOL; v.i = 2;
        GgufWriter w; w.set("k", v);
    }, "out of range for bool");
    expect_error([] { GgufWriter w; w.set("k", GgufValue::int_array(GgufValueType::I8, {1, 200})); }, "element 200");
    expect_error([] {
        GgufValue v = GgufValue::int_array(GgufValueType::F32, {1});
        GgufWriter w; w.set("k", v);
    }, "stored for another type");
    expect_error([] {
        GgufValue v; v.type = GgufValueType::ARRAY; v.elem_type = GgufValueType::ARRAY; v.arrays = {GgufValue::u32(1)};
        GgufWriter w; w.set("k", v);
    }, "non-array element");
    auto fill = [](uint8_t*, size_t) {};
    expect_error([&] { GgufWriter w; w.add_tensor("t", GgmlType::F32, {2}, fill); w.add_tensor("t", GgmlType::F32, {2}, fill); },
                 "declared twice");
    expect_error([&] { GgufWriter w; w.add_tensor(std::string(64, 'n'), GgmlType::F32, {2}, fill); }, "at most 63");
    expect_error([&] { GgufWriter w; w.add_tensor("t", GgmlType::Q4_K, {100}, fill); }, "block size 256");
    expect_error([&] { GgufWriter w; w.add_tensor("t", GgmlType::F32, {1, 2, 3, 4, 5}, fill); }, "5 dimensions");
    expect_error([&] { GgufWriter w; w.add_tensor("t", GgmlType::F32, {-1}, fill); }, "negative");
    expect_error([&] { GgufWriter w; w.add_tensor("t", GgmlType::F32, {1ll << 40, 1ll << 40}, fill); }, "overflows");
    expect_error([&] { GgufWriter w; w.add_tensor("t", static_cast<GgmlType>(4), {2}, fill); }, "unknown type 4");
    expect_error([] { GgufWriter w; w.add_tensor_bytes("t", GgmlType::F16, {3}, std::vector<uint8_t>(5)); }, "needs 6 bytes");
    expect_error([] { GgufWriter w; w.write("/nonexistent-dir/x.gguf"); }, "/nonexistent-dir/x.gguf");
}

TEST(GgufWriterErrors, FailingFillLeavesNoFile) {
    GgufWriter w;
    w.add_tensor("t", GgmlType::F32, {4}, [](uint8_t*, size_t) { throw Error("source tensor unreadable."); });
    const std::string path = temp_path("gguf_fill_fails");
    EXPECT_THROW(w.write(path), Error);
    EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace ds4

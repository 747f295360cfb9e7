// The reader's validation: every malformed file gives one ds4::Error whose
// sentence names the file and the problem, never a crash. Malformed files are
// built byte by byte here (not with GgufWriter, which refuses to make them).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "common/error.h"
#include "gguf_random_content.h"

namespace ds4 {
namespace {

// A GGUF file spelled out field by field.
class Raw {
public:
    Raw& u32(uint32_t v) { return put(&v, 4); }
    Raw& u64(uint64_t v) { return put(&v, 8); }
    Raw& u8(uint8_t v) { return put(&v, 1); }
    Raw& str(const std::string& s) { u64(s.size()); return put(s.data(), s.size()); }
    Raw& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
        return u32(0x46554747).u32(version).u64(n_tensors).u64(n_kv);
    }
    Raw& kv_u32(const std::string& k, uint32_t v) { return str(k).u32(4).u32(v); }
    // name, dims, type, offset
    Raw& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
        str(name).u32(static_cast<uint32_t>(ne.size()));
        for (auto n : ne) u64(n);
        return u32(type).u64(offset);
    }
    Raw& pad(size_t al) {
        while (b.size() % al) b.push_back(0);
        return *this;
    }
    Raw& zeros(size_t n) {
        b.resize(b.size() + n);
        return *this;
    }
    Raw& put(const void* p, size_t n) {
        auto* c = static_cast<const uint8_t*>(p);
        b.insert(b.end(), c, c + n);
        return *this;
    }
    std::vector<uint8_t> b;
};

// Parses and expects one ds4::Error: one sentence, naming the file, mentioning `needle`.
void expect_rejected(const std::vector<uint8_t>& bytes, const std::string& needle) {
    try {
        GgufFile::parse(bytes.data(), bytes.size(), "bad.gguf");
        ADD_FAILURE() << "accepted; expected an error mentioning '" << needle << "'";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find(needle), std::string::npos) << m;
        EXPECT_EQ(m.rfind("bad.gguf ", 0), 0u) << "the sentence starts with the file: " << m;
        EXPECT_EQ(m.back(), '.') << m;
        EXPECT_EQ(m.find('\n'), std::string::npos) << m;
        EXPECT_LT(m.size(), 400u) << m;
    }
}

TEST(GgufReader, BadMagic) {
    expect_rejected(Raw().u32(0x46554746).u32(3).u64(0).u64(0).b, "bad magic");
    expect_rejected(Raw().str("{\"not\": \"gguf\"}").b, "bad magic");
}

TEST(GgufReader, BadVersion) {
    expect_rejected(Raw().header(0, 0, 1).b, "version 1");
    expect_rejected(Raw().header(0, 0, 4).b, "version 4");
    expect_rejected(Raw().header(0, 0, 0x03000000).b, "version 50331648");  // big-endian file
}

TEST(GgufReader, VersionTwoAndThreeAccepted) {
    for (uint32_t v : {2u, 3u}) {
        auto bytes = Raw().header(0, 1, v).kv_u32("a", 7).b;
        auto f = GgufFile::parse(bytes.data(), bytes.size(), "ok.gguf");
        EXPECT_EQ(f->version(), v);
        EXPECT_EQ(f->require_uint("a"), 7u);
    }
}

// Cuts a valid file at every byte of its header and at random points of its
// tensor data: each cut must throw ds4::Error (through memory and through a
// real file), never crash or read past the end.
TEST(GgufReader, TruncatedAtManyCutPoints) {
    const uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const std::string path = (std::filesystem::temp_directory_path() / ("gguf_cut." + std::to_string(::getpid()))).string();
    for (int file = 0; file < 4; ++file) {
        testing::RandomOptions o;
        o.max_kv = 10;
        testing::RandomGguf g;
        do g = testing::random_gguf(rng, o); while (g.tensors.empty());
        g.tensors.push_back({"last", GgmlType::F32, {8}, std::vector<uint8_t>(32, 1)});  // a non-empty last tensor
        const auto bytes = testing::make_writer(g).to_bytes();
        auto whole = GgufFile::parse(bytes.data(), bytes.size(), "whole.gguf");
        uint64_t data_end = 0;  // end of the last byte any tensor needs
        for (const auto& t : whole->tensors()) data_end = std::max(data_end, t.file_offset + t.nbytes);

        std::vector<size_t> cuts;
        for (size_t c = 0; c < whole->data_offset(); ++c) cuts.push_back(c);
        ASSERT_LT(cuts.size(), 40000u) << "the random header is too large for a test of every cut";
        for (int i = 0; i < 300; ++i) cuts.push_back(whole->data_offset() + rng() % (data_end - whole->data_offset()));
        for (size_t c : cuts) {
            SCOPED_TRACE("cut at " + std::to_string(c) + " of " + std::to_string(bytes.size()));
            // A copy of exactly c bytes, so a read past the end is an ASan finding.
            std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + c);
            try {
                GgufFile::parse(cut.data(), cut.size(), "cut.gguf");
                ADD_FAILURE() << "a truncated file was accepted";
            } catch (const Error& e) {
                const std::string m = e.what();
                EXPECT_TRUE(m.find("truncated") != std::string::npos || m.find("bad magic") != std::string::npos) << m;
            }
        }
        // The file path too (pread-based source), at a sample of the cuts.
        for (int i = 0; i < 25; ++i) {
            const size_t c = cuts[rng() % cuts.size()];
            {
                std::ofstream out(path, std::ios::binary | std::ios::trunc);
                out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(c));
            }
            try {
                GgufFile::open(path);
                ADD_FAILURE() << "a file truncated at " << c << " was accepted";
            } catch (const Error& e) {
                EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
            }
        }
        // Past the last tensor only padding is missing: still a valid file.
        EXPECT_NO_THROW(GgufFile::parse(bytes.data(), data_end, "unpadded.gguf"));
    }
    std::filesystem::remove(path);
}

TEST(GgufReader, TensorDataOutsideTheFile) {
    auto bytes = Raw().header(1, 0).tensor("w", {8}, 0, 0).pad(32).zeros(16).b;  // needs 32 bytes, has 16
    expect_rejected(bytes, "lies outside the file");
    bytes = Raw().header(1, 0).tensor("w", {8}, 0, 1ull << 62).pad(32).zeros(64).b;
    expect_rejected(bytes, "lies outside the file");
    bytes = Raw().header(1, 0).tensor("w", {8}, 0, ~0ull - 31).pad(32).zeros(64).b;  // offset + size wraps
    expect_rejected(bytes, "lies outside the file");
}

TEST(GgufReader, OverlappingTensors) {
    auto bytes = Raw().header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32).pad(32).zeros(128).b;
    expect_rejected(bytes, "overlapping tensors 'a' and 'b'");
    // An empty tensor sorted between two overlapping ones must not hide them.
    bytes = Raw().header(3, 0).tensor("a", {64}, 0, 0).tensor("e", {0}, 0, 32).tensor("c", {8}, 0, 64).pad(32).zeros(512).b;
    expect_rejected(bytes, "overlapping tensors 'a' and 'c'");
    // Touching is fine.
    bytes = Raw().header(2, 0).tensor("a", {8}, 0, 0).tensor("b", {8}, 0, 32).pad(32).zeros(64).b;
    EXPECT_NO_THROW(GgufFile::parse(bytes.data(), bytes.size(), "ok.gguf"));
}

TEST(GgufReader, DimensionOverflow) {
    expect_rejected(Raw().header(1, 0).tensor("w", {1ull << 32, 1ull << 32}, 0, 0).pad(32).b, "overflows 63 bits");
    expect_rejected(Raw().header(1, 0).tensor("w", {1ull << 63}, 0, 0).pad(32).b, "negative dimension");
    // 2^62 f32 elements: the count fits, the byte size does not.
    expect_rejected(Raw().header(1, 0).tensor("w", {1ull << 31, 1ull << 31}, 0, 0).pad(32).b, "overflows 64 bits");
}

TEST(GgufReader, UnknownTensorType) {
    expect_rejected(Raw().header(1, 0).tensor("w", {32}, 4, 0).pad(32).zeros(64).b, "unknown type 4");
    expect_rejected(Raw().header(1, 0).tensor("w", {32}, 43, 0).pad(32).zeros(64).b, "unknown type 43");
    expect_rejected(Raw().header(1, 0).tensor("w", {32}, 0xffffffff, 0).pad(32).zeros(64).b, "unknown type 4294967295");
}

TEST(GgufReader, UnknownValueType) {
    expect_rejected(Raw().header(0, 1).str("k").u32(13).u32(0).b, "unknown value type 13");
    expect_rejected(Raw().header(0, 1).str("k").u32(9).u32(77).u64(0).b, "unknown element type 77");
}

TEST(GgufReader, DuplicateKeyOrTensor) {
    expect_rejected(Raw().header(0, 2).kv_u32("k", 1).kv_u32("k", 2).b, "metadata key 'k' twice");
    expect_rejected(Raw().header(2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad(32).zeros(64).b,
                    "tensor 'w' twice");
}

TEST(GgufReader, BadAlignment) {
    for (uint32_t al : {0u, 3u, 48u, 0x80000001u})
        expect_rejected(Raw().header(0, 1).kv_u32("general.alignment", al).b, "not a power of two");
    expect_rejected(Raw().header(0, 1).str("general.alignment").u32(10).u64(64).b, "must be u32");
    // A tensor offset that is not a multiple of the alignment.
    expect_rejected(Raw().header(1, 1).kv_u32("general.alignment", 64).tensor("w", {8}, 0, 32).pad(64).zeros(128).b,
                    "not aligned to 64");
    // A good non-default alignment moves the data section.
    auto ok = Raw().header(1, 1).kv_u32("general.alignment", 256).tensor("w", {8}, 0, 0).pad(256).zeros(32).b;
    auto f = GgufFile::parse(ok.data(), ok.size(), "ok.gguf");
    EXPECT_EQ(f->data_offset(), 256u);
    EXPECT_EQ(f->tensors()[0].file_offset, 256u);
}

TEST(GgufReader, TooManyDimensions) {
    expect_rejected(Raw().header(1, 0).tensor("w", {1, 1, 1, 1, 1}, 0, 0).pad(32).zeros(32).b, "5 dimensions (at most 4)");
    expect_rejected(Raw().header(1, 0).str("w").u32(0xffffffff).b, "4294967295 dimensions");
}

TEST(GgufReader, RowNotAMultipleOfTheBlockSize) {
    expect_rejected(Raw().header(1, 0).tensor("w", {100, 2}, 12, 0).pad(32).zeros(1024).b,
                    "rows of 100 elements, not a multiple of the q4_K block size 256");
    expect_rejected(Raw().header(1, 0).tensor("w", {33}, 8, 0).pad(32).zeros(1024).b, "q8_0 block size 32");
}

TEST(GgufReader, CorruptCountsAndLengths) {
    expect_rejected(Raw().header(~0ull, 0).b, "more than the file can hold");
    expect_rejected(Raw().header(0, 1ull << 40).b, "more than the file can hold");
    expect_rejected(Raw().header(0, 1).u64(~0ull).b, "claims");                         // key length
    expect_rejected(Raw().header(0, 1).str("k").u32(8).u64(1ull << 40).b, "claims");    // string value length
    expect_rejected(Raw().header(0, 1).str("k").u32(9).u32(8).u64(1ull << 61).b, "claims 2305843009213693952 elements");
    expect_rejected(Raw().header(0, 1).str("k").u32(9).u32(0).u64(100).zeros(50).b, "claims 100 elements");
    expect_rejected(Raw().header(0, 1).str("k").u32(7).u8(2).b, "bool value of 2");
    expect_rejected(Raw().header(0, 1).str("").u32(4).u32(1).b, "empty metadata key");
    expect_rejected(Raw().header(1, 0).tensor("", {8}, 0, 0).pad(32).zeros(32).b, "empty name");
}

// A corrupt count in a huge file must be an Error, not a reservation of
// terabytes (std::bad_alloc) or hours of reading zeros. A sparse 1 TiB file
// stands in for a real giant model.
TEST(GgufReader, CorruptCountsInAHugeSparseFile) {
    const std::string path = (std::filesystem::temp_directory_path() / ("gguf_sparse." + std::to_string(::getpid()))).string();
    auto check = [&](const std::vector<uint8_t>& head, const std::string& needle) {
        {
            std::ofstream out(path, std::ios::binary | std::ios::trunc);
            out.write(reinterpret_cast<const char*>(head.data()), static_cast<std::streamsize>(head.size()));
        }
        std::filesystem::resize_file(path, uint64_t{1} << 40);
        try {
            GgufFile::open(path);
            ADD_FAILURE() << "accepted; expected an error mentioning '" << needle << "'";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    check(Raw().header(0, 1ull << 36).kv_u32("a", 1).b, "empty metadata key");
    check(Raw().header(1ull << 36, 0).b, "empty name");
    check(Raw().header(0, 1).str("arr").u32(9).u32(0).u64(1ull << 31).b, "more than the 2^30 ggml allows");
    check(Raw().header(0, 1).str("arr").u32(9).u32(8).u64(1ull << 34).b, "more than the 2^30 ggml allows");
    std::filesystem::remove(path);
}

TEST(GgufReader, ArraysNestedTooDeeply) {
    Raw r;
    r.header(0, 1).str("deep").u32(9);
    for (int d = 0; d < 9; ++d) r.u32(9).u64(1);  // nine levels of one-element arrays
    r.u32(4).u64(1).u32(5);
    expect_rejected(r.b, "nested too deeply");
    // Eight levels are fine.
    Raw ok;
    ok.header(0, 1).str("deep").u32(9);
    for (int d = 0; d < 7; ++d) ok.u32(9).u64(1);
    ok.u32(4).u64(1).u32(5);
    auto f = GgufFile::parse(ok.b.data(), ok.b.size(), "ok.gguf");
    const GgufValue* v = &f->require_array("deep");
    for (int d = 0; d < 7; ++d) v = &v->arrays.at(0);
    EXPECT_EQ(v->ints.at(0), 5);
}

TEST(GgufReader, BinaryNamesArePrintableInErrors) {
    const std::string name = std::string("\x01\xff\n", 3) + std::string(500, 'x');
    try {
        auto bytes = Raw().header(0, 2).kv_u32(name, 1).kv_u32(name, 2).b;
        GgufFile::parse(bytes.data(), bytes.size(), "bin.gguf");
        ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("\\x01\\xff\\x0a"), std::string::npos) << m;
        EXPECT_EQ(m.find('\n'), std::string::npos);
        EXPECT_LT(m.size(), 200u);
    }
}

TEST(GgufReader, TypedLookupsExplainMismatches) {
    auto bytes = Raw().header(0, 3).kv_u32("n", 5).str("s").u32(8).str("text").str("neg").u32(5).u32(0xffffffff).b;
    auto f = GgufFile::parse(bytes.data(), bytes.size(), "typed.gguf");
    EXPECT_EQ(f->require_uint("n"), 5u);
    auto msg = [](const std::function<void()>& fn) {
        try { fn(); } catch (const Error& e) { return std::string(e.what()); }
        return std::string("no error");
    };
    EXPECT_NE(msg([&] { f->require_uint("s"); }).find("'s' of type string where an unsigned integer is expected"), std::string::npos);
    EXPECT_NE(msg([&] { f->require_uint("neg"); }).find("negative value"), std::string::npos);
    EXPECT_NE(msg([&] { f->require_string("missing"); }).find("typed.gguf lacks metadata key 'missing'"), std::string::npos);
    EXPECT_NE(msg([&] { f->require_tensor("w"); }).find("lacks tensor 'w'"), std::string::npos);
    EXPECT_NE(msg([&] { f->require_array("n"); }).find("where an array is expected"), std::string::npos);
    EXPECT_EQ(f->get_uint("missing"), std::nullopt);
}

TEST(GgufReader, OpenNamesThePath) {
    try {
        GgufFile::open("/nonexistent/model.gguf");
        ADD_FAILURE();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
    }
    try {
        GgufFile::open(std::filesystem::temp_directory_path().string());
        ADD_FAILURE();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
    }
}

// Inputs the fuzzer once found crashing (or undefined behaviour under UBSan),
// kept in tests/fuzz/regressions/fuzz_gguf: each must now be rejected with a
// sentence. zero-dim-overflow.bin: a tensor with a zero dimension and others
// whose product overflows int64 (n_elements() multiplied them before).
TEST(GgufReaderRegressions, FuzzerFindingsAreRejectedWithASentence) {
    const std::filesystem::path dir = std::filesystem::path(DS4_SOURCE_DIR) / "tests/fuzz/regressions/fuzz_gguf";
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        SCOPED_TRACE(e.path().string());
        std::ifstream in(e.path(), std::ios::binary);
        const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        ++n;
        try {
            GgufFile::parse(bytes.data(), bytes.size(), e.path().filename().string());
            ADD_FAILURE() << "accepted";
        } catch (const Error& err) {
            EXPECT_NE(std::string(err.what()).find(e.path().filename().string()), std::string::npos) << err.what();
        }
    }
    EXPECT_GE(n, 1);
}

}  // namespace
}  // namespace ds4

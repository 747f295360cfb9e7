// GGUF compatibility with ggml's own gguf library (libggml-base.so):
//  - files written by GgufWriter are read identically by gguf_init_from_file;
//  - files written by ggml (gguf_set_*, gguf_add_tensor, gguf_write_to_file)
//    are read identically by GgufFile, and GgufWriter reproduces them byte
//    for byte from the same content;
//  - real files written by gguf-py (llama.cpp's vocab GGUFs) read the same;
//  - ds4's type table matches ggml's type traits.
// Random content comes from a fresh seed each run (printed on failure).
#include <ggml.h>
#include <gguf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "../unit/gguf_random_content.h"
#include "common/error.h"

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

struct GgufCtx {
    gguf_context* gguf = nullptr;
    ggml_context* data = nullptr;
    ~GgufCtx() {
        if (gguf) gguf_free(gguf);
        if (data) ggml_free(data);
    }
};

// What ggml read for key `id`, as a GgufValue (ggml has no nested arrays).
GgufValue from_ggml(const gguf_context* ctx, int64_t id) {
    auto scalar = [&](GgufValueType t, const void* p, GgufValue& out, bool in_array) {
        int64_t i = 0;
        double f = 0;
        switch (t) {
            case GgufValueType::U8: i = *static_cast<const uint8_t*>(p); break;
            case GgufValueType::I8: i = *static_cast<const int8_t*>(p); break;
            case GgufValueType::BOOL: i = *static_cast<const int8_t*>(p) != 0; break;
            case GgufValueType::U16: i = *static_cast<const uint16_t*>(p); break;
            case GgufValueType::I16: i = *static_cast<const int16_t*>(p); break;
            case GgufValueType::U32: i = *static_cast<const uint32_t*>(p); break;
            case GgufValueType::I32: i = *static_cast<const int32_t*>(p); break;
            case GgufValueType::U64: case GgufValueType::I64: std::memcpy(&i, p, 8); break;
            case GgufValueType::F32: f = *static_cast<const float*>(p); break;
            case GgufValueType::F64: f = *static_cast<const double*>(p); break;
            default: ADD_FAILURE() << "unexpected scalar type"; break;
        }
        const bool is_f = t == GgufValueType::F32 || t == GgufValueType::F64;
        if (in_array) {
            if (is_f) out.floats.push_back(f); else out.ints.push_back(i);
        } else {
            if (is_f) out.f = f; else out.i = i;
        }
    };
    GgufValue v;
    const auto t = static_cast<GgufValueType>(gguf_get_kv_type(ctx, id));
    v.type = t;
    if (t == GgufValueType::STRING) {
        v.str = gguf_get_val_str(ctx, id);
    } else if (t == GgufValueType::ARRAY) {
        v.elem_type = static_cast<GgufValueType>(gguf_get_arr_type(ctx, id));
        const size_t n = gguf_get_arr_n(ctx, id);
        if (v.elem_type == GgufValueType::STRING) {
            for (size_t i = 0; i < n; ++i) v.strings.emplace_back(gguf_get_arr_str(ctx, id, i));
        } else {
            const auto* base = static_cast<const uint8_t*>(gguf_get_arr_data(ctx, id));
            const size_t sz = gguf_value_type_size(v.elem_type);
            for (size_t i = 0; i < n; ++i) scalar(v.elem_type, base + i * sz, v, true);
        }
    } else {
        scalar(t, gguf_get_val_data(ctx, id), v, false);
    }
    return v;
}

// ggml's strings are C strings: an embedded NUL ends them early. Content for
// ggml comparisons therefore has no NUL bytes in strings.
void strip_nuls(RandomGguf& g) {
    auto fix = [](std::string& s) { std::replace(s.begin(), s.end(), '\0', '@'); };
    for (auto& [k, v] : g.kv) {
        fix(v.str);
        for (auto& s : v.strings) fix(s);
    }
}

// Every key, value, tensor info and tensor byte ggml read equals `g`.
void expect_ggml_sees(const RandomGguf& g, const gguf_context* ctx, ggml_context* data) {
    EXPECT_EQ(gguf_get_version(ctx), 3u);
    EXPECT_EQ(gguf_get_alignment(ctx), g.alignment);
    const int64_t extra = g.alignment != 32 ? 1 : 0;
    ASSERT_EQ(gguf_get_n_kv(ctx), static_cast<int64_t>(g.kv.size()) + extra);
    if (extra) {
        EXPECT_STREQ(gguf_get_key(ctx, 0), "general.alignment");
        EXPECT_EQ(gguf_get_val_u32(ctx, 0), g.alignment);
    }
    for (size_t k = 0; k < g.kv.size(); ++k) {
        const int64_t id = static_cast<int64_t>(k) + extra;
        EXPECT_EQ(std::string(gguf_get_key(ctx, id)), g.kv[k].first);
        EXPECT_EQ(gguf_find_key(ctx, g.kv[k].first.c_str()), id);
        EXPECT_EQ(testing::value_difference(g.kv[k].second, from_ggml(ctx, id)), "") << "key " << g.kv[k].first;
    }
    ASSERT_EQ(gguf_get_n_tensors(ctx), static_cast<int64_t>(g.tensors.size()));
    size_t offset = 0;
    for (size_t i = 0; i < g.tensors.size(); ++i) {
        const auto& t = g.tensors[i];
        SCOPED_TRACE("tensor " + t.name);
        const auto id = static_cast<int64_t>(i);
        EXPECT_EQ(std::string(gguf_get_tensor_name(ctx, id)), t.name);
        EXPECT_EQ(static_cast<uint32_t>(gguf_get_tensor_type(ctx, id)), static_cast<uint32_t>(t.type));
        const int64_t* ne = gguf_get_tensor_ne(ctx, id);
        for (int d = 0; d < 4; ++d) EXPECT_EQ(ne[d], d < static_cast<int>(t.ne.size()) ? t.ne[d] : 1);
        EXPECT_EQ(gguf_get_tensor_offset(ctx, id), offset);
        EXPECT_EQ(gguf_get_tensor_size(ctx, id), t.bytes.size());
        offset += (t.bytes.size() + g.alignment - 1) / g.alignment * g.alignment;
        if (data) {
            const ggml_tensor* gt = ggml_get_tensor(data, t.name.c_str());
            ASSERT_NE(gt, nullptr);
            ASSERT_EQ(ggml_nbytes(gt), t.bytes.size());
            if (!t.bytes.empty())  // an empty tensor has no data pointer to compare
                EXPECT_EQ(std::memcmp(gt->data, t.bytes.data(), t.bytes.size()), 0) << "tensor bytes differ";
        }
    }
}

TEST(GgufGgmlCompat, OurFilesReadByGgml) {
    const uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    testing::RandomOptions o;
    o.nested_arrays = false;  // ggml rejects arrays of arrays
    const std::string path = temp_path("gguf_ours_for_ggml");
    for (int round = 0; round < 40; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        RandomGguf g = testing::random_gguf(rng, o);
        strip_nuls(g);
        const GgufWriter w = testing::make_writer(g);
        w.write(path);
        GgufCtx c;
        c.gguf = gguf_init_from_file(path.c_str(), {/*no_alloc=*/false, &c.data});
        ASSERT_NE(c.gguf, nullptr) << "ggml rejected a file GgufWriter wrote";
        expect_ggml_sees(g, c.gguf, c.data);
        auto ours = GgufFile::open(path);
        if (!g.tensors.empty()) EXPECT_EQ(gguf_get_data_offset(c.gguf), ours->data_offset());
    }
    std::filesystem::remove(path);
}

// Writes `g` through ggml's API.
void write_with_ggml(const RandomGguf& g, const std::string& path) {
    gguf_context* ctx = gguf_init_empty();
    for (const auto& [key, v] : g.kv) {
        const char* k = key.c_str();
        switch (v.type) {
            case GgufValueType::U8: gguf_set_val_u8(ctx, k, static_cast<uint8_t>(v.i)); break;
            case GgufValueType::I8: gguf_set_val_i8(ctx, k, static_cast<int8_t>(v.i)); break;
            case GgufValueType::U16: gguf_set_val_u16(ctx, k, static_cast<uint16_t>(v.i)); break;
            case GgufValueType::I16: gguf_set_val_i16(ctx, k, static_cast<int16_t>(v.i)); break;
            case GgufValueType::U32: gguf_set_val_u32(ctx, k, static_cast<uint32_t>(v.i)); break;
            case GgufValueType::I32: gguf_set_val_i32(ctx, k, static_cast<int32_t>(v.i)); break;
            case GgufValueType::U64: gguf_set_val_u64(ctx, k, static_cast<uint64_t>(v.i)); break;
            case GgufValueType::I64: gguf_set_val_i64(ctx, k, v.i); break;
            case GgufValueType::F32: gguf_set_val_f32(ctx, k, static_cast<float>(v.f)); break;
            case GgufValueType::F64: gguf_set_val_f64(ctx, k, v.f); break;
            case GgufValueType::BOOL: gguf_set_val_bool(ctx, k, v.i != 0); break;
            case GgufValueType::STRING: gguf_set_val_str(ctx, k, v.str.c_str()); break;
            case GgufValueType::ARRAY: {
                if (v.elem_type == GgufValueType::STRING) {
                    std::vector<const char*> p;
                    for (const auto& s : v.strings) p.push_back(s.c_str());
                    gguf_set_arr_str(ctx, k, p.data(), p.size());
                    break;
                }
                const size_t sz = gguf_value_type_size(v.elem_type);
                std::vector<uint8_t> raw(v.array_size() * sz);
                for (size_t i = 0; i < v.array_size(); ++i) {
                    uint8_t* dst = raw.data() + i * sz;
                    if (v.elem_type == GgufValueType::F32) { float f = static_cast<float>(v.floats[i]); std::memcpy(dst, &f, 4); }
                    else if (v.elem_type == GgufValueType::F64) std::memcpy(dst, &v.floats[i], 8);
                    else std::memcpy(dst, &v.ints[i], sz);  // little-endian: low bytes first
                }
                gguf_set_arr_data(ctx, k, static_cast<gguf_type>(v.elem_type), raw.data(), v.array_size());
                break;
            }
        }
    }
    size_t mem = 1 << 20;
    for (const auto& t : g.tensors) mem += t.bytes.size() + ggml_tensor_overhead() + 64;
    ggml_context* data = ggml_init({mem, nullptr, false});
    for (const auto& t : g.tensors) {
        ggml_tensor* gt = ggml_new_tensor(data, static_cast<ggml_type>(t.type), static_cast<int>(t.ne.size()), t.ne.data());
        ggml_set_name(gt, t.name.c_str());
        if (!t.bytes.empty()) std::memcpy(gt->data, t.bytes.data(), t.bytes.size());
        gguf_add_tensor(ctx, gt);
    }
    const bool ok = gguf_write_to_file(ctx, path.c_str(), false);
    gguf_free(ctx);
    ggml_free(data);
    ASSERT_TRUE(ok) << "ggml could not write " << path;
}

TEST(GgufGgmlCompat, GgmlFilesReadByUsAndReproducedByteForByte) {
    const uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    testing::RandomOptions o;
    o.nested_arrays = false;
    o.any_alignment = false;  // ggml's writer always lays data out at 32
    o.trailing_ones = false;  // ggml's writer stores ggml_n_dims, which drops them
    o.empty_tensors = false;  // ggml_new_tensor gives no data pointer to write from
    const std::string path = temp_path("gguf_from_ggml");
    for (int round = 0; round < 40; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        RandomGguf g = testing::random_gguf(rng, o);
        strip_nuls(g);
        write_with_ggml(g, path);
        const auto ggml_bytes = slurp(path);
        auto f = GgufFile::open(path);
        ASSERT_EQ(f->metadata().size(), g.kv.size());
        for (size_t k = 0; k < g.kv.size(); ++k) {
            EXPECT_EQ(f->metadata()[k].first, g.kv[k].first);
            EXPECT_EQ(testing::value_difference(g.kv[k].second, f->metadata()[k].second), "") << g.kv[k].first;
        }
        ASSERT_EQ(f->tensors().size(), g.tensors.size());
        for (size_t i = 0; i < g.tensors.size(); ++i) {
            const auto& want = g.tensors[i];
            const auto& got = f->tensors()[i];
            EXPECT_EQ(got.name, want.name);
            EXPECT_EQ(got.type, want.type);
            EXPECT_EQ(got.n_dims, want.ne.size());
            for (int d = 0; d < 4; ++d) EXPECT_EQ(got.ne[d], d < static_cast<int>(want.ne.size()) ? want.ne[d] : 1);
            ASSERT_EQ(got.nbytes, want.bytes.size());
            ASSERT_LE(got.file_offset + got.nbytes, ggml_bytes.size());
            EXPECT_TRUE(std::equal(want.bytes.begin(), want.bytes.end(), ggml_bytes.begin() + got.file_offset));
        }
        // And ggml's reader agrees on where everything is.
        GgufCtx c;
        c.gguf = gguf_init_from_file(path.c_str(), {true, nullptr});
        ASSERT_NE(c.gguf, nullptr);
        for (size_t i = 0; i < g.tensors.size(); ++i)
            EXPECT_EQ(gguf_get_tensor_offset(c.gguf, static_cast<int64_t>(i)), f->tensors()[i].offset);
        if (!g.tensors.empty()) EXPECT_EQ(gguf_get_data_offset(c.gguf), f->data_offset());

        const auto ours = testing::make_writer(g).to_bytes();
        EXPECT_EQ(ours.size(), ggml_bytes.size());
        EXPECT_TRUE(ours == ggml_bytes) << "GgufWriter and ggml's writer lay out the same content differently";
    }
    std::filesystem::remove(path);
}

// Real files from a third writer (gguf-py): both readers agree on everything.
TEST(GgufGgmlCompat, LlamaCppVocabFilesReadTheSame) {
    const std::filesystem::path dir = std::filesystem::path(DS4_ORACLE_DIR) / "llama.cpp" / "models";
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        const std::string p = e.path().string();
        if (e.path().extension() != ".gguf" || e.path().filename().string().rfind("ggml-vocab-", 0) != 0) continue;
        SCOPED_TRACE(p);
        ++files;
        auto f = GgufFile::open(p);
        GgufCtx c;
        c.gguf = gguf_init_from_file(p.c_str(), {true, nullptr});
        ASSERT_NE(c.gguf, nullptr);
        EXPECT_EQ(f->version(), gguf_get_version(c.gguf));
        EXPECT_EQ(f->alignment(), gguf_get_alignment(c.gguf));
        ASSERT_EQ(f->metadata().size(), static_cast<size_t>(gguf_get_n_kv(c.gguf)));
        for (size_t k = 0; k < f->metadata().size(); ++k) {
            const auto& [key, v] = f->metadata()[k];
            EXPECT_EQ(key, gguf_get_key(c.gguf, static_cast<int64_t>(k)));
            EXPECT_EQ(testing::value_difference(from_ggml(c.gguf, static_cast<int64_t>(k)), v), "") << key;
        }
        ASSERT_EQ(f->tensors().size(), static_cast<size_t>(gguf_get_n_tensors(c.gguf)));
        for (size_t i = 0; i < f->tensors().size(); ++i) {
            const auto& t = f->tensors()[i];
            const auto id = static_cast<int64_t>(i);
            EXPECT_EQ(t.name, gguf_get_tensor_name(c.gguf, id));
            EXPECT_EQ(static_cast<uint32_t>(t.type), static_cast<uint32_t>(gguf_get_tensor_type(c.gguf, id)));
            EXPECT_EQ(t.offset, gguf_get_tensor_offset(c.gguf, id));
            EXPECT_EQ(t.nbytes, gguf_get_tensor_size(c.gguf, id));
            for (int d = 0; d < 4; ++d) EXPECT_EQ(t.ne[d], gguf_get_tensor_ne(c.gguf, id)[d]);
        }
        if (f->tensors().size() > 0) EXPECT_EQ(f->data_offset(), gguf_get_data_offset(c.gguf));
    }
    EXPECT_GE(files, 10) << "the llama.cpp vocab GGUFs are missing from " << dir;
}

TEST(GgufTypes, TableMatchesGgml) {
    int known = 0;
    for (int id = 0; id < GGML_TYPE_COUNT + 8; ++id) {
        SCOPED_TRACE("type " + std::to_string(id));
        const auto ours = ggml_type_traits(static_cast<uint32_t>(id));
        const bool ggml_has = id < GGML_TYPE_COUNT && ggml_blck_size(static_cast<ggml_type>(id)) > 0;
        ASSERT_EQ(ours.has_value(), ggml_has);
        if (!ggml_has) continue;
        ++known;
        const auto t = static_cast<ggml_type>(id);
        EXPECT_EQ(ours->name, ggml_type_name(t));
        EXPECT_EQ(ours->block_elems, ggml_blck_size(t));
        EXPECT_EQ(ours->block_bytes, ggml_type_size(t));
        EXPECT_EQ(ggml_type_from_name(ggml_type_name(t)), static_cast<GgmlType>(id));
        EXPECT_EQ(ggml_row_bytes(static_cast<GgmlType>(id), ours->block_elems * 3), ggml_row_size(t, ours->block_elems * 3));
    }
    EXPECT_GE(known, 30);
}

}  // namespace
}  // namespace ds4

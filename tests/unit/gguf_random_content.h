// Random GGUF content for tests of the writer, the reader and ggml's reader:
// metadata of every value type (nested arrays optional) and tensors of many
// types with random bytes. Header-only; each test draws a fresh seed.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "support/test_seed.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_value.h"
#include "gguf/gguf_writer.h"

namespace ds4::testing {

// Fresh each run, or DS4_TEST_SEED (tests/support/test_seed.h).
inline uint64_t fresh_seed() { return ds4::test::test_seed(); }

struct RandomTensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> bytes;
};

struct RandomGguf {
    uint64_t alignment = 32;
    std::vector<std::pair<std::string, GgufValue>> kv;
    std::vector<RandomTensor> tensors;
};

struct RandomOptions {
    bool nested_arrays = true;   // ggml cannot read arrays of arrays
    bool any_alignment = true;   // else 32 (ggml's writer ignores general.alignment)
    bool trailing_ones = true;   // ggml's writer drops trailing dimensions of 1
    bool empty_tensors = true;   // ggml's writer cannot write a tensor of no elements
    int max_kv = 24;
    int max_tensors = 8;
};

inline std::string random_string(std::mt19937_64& rng, size_t max_len, bool binary) {
    std::uniform_int_distribution<size_t> len(0, max_len);
    std::string s(len(rng), '\0');
    for (auto& c : s) c = binary ? static_cast<char>(rng()) : static_cast<char>('a' + rng() % 26);
    // Some multi-byte UTF-8, as real vocabularies have.
    if (!binary && rng() % 3 == 0) s += "\xe4\xb8\xad\xf0\x9f\x98\x80";
    return s;
}

inline int64_t random_int(std::mt19937_64& rng, GgufValueType t) {
    const uint64_t r = rng();
    switch (t) {
        case GgufValueType::U8: return static_cast<uint8_t>(r);
        case GgufValueType::I8: return static_cast<int8_t>(r);
        case GgufValueType::U16: return static_cast<uint16_t>(r);
        case GgufValueType::I16: return static_cast<int16_t>(r);
        case GgufValueType::U32: return static_cast<uint32_t>(r);
        case GgufValueType::I32: return static_cast<int32_t>(r);
        case GgufValueType::BOOL: return static_cast<int64_t>(r & 1);
        default: return static_cast<int64_t>(r);  // U64 bit pattern, I64
    }
}

inline double random_float(std::mt19937_64& rng, GgufValueType t) {
    switch (rng() % 16) {
        case 0: return INFINITY;
        case 1: return -0.0;
        case 2: return t == GgufValueType::F32 ? 1e-40 : 4.9e-324;  // subnormal
        default: break;
    }
    if (t == GgufValueType::F32) {
        float f;
        do f = std::bit_cast<float>(static_cast<uint32_t>(rng())); while (std::isnan(f));
        return f;
    }
    double d;
    do d = std::bit_cast<double>(rng()); while (std::isnan(d));
    return d;
}

constexpr GgufValueType kScalarTypes[] = {
    GgufValueType::U8, GgufValueType::I8, GgufValueType::U16, GgufValueType::I16, GgufValueType::U32,
    GgufValueType::I32, GgufValueType::F32, GgufValueType::BOOL, GgufValueType::STRING, GgufValueType::U64,
    GgufValueType::I64, GgufValueType::F64};

inline GgufValue random_array(std::mt19937_64& rng, GgufValueType elem, int depth, bool nested);

inline GgufValue random_value(std::mt19937_64& rng, GgufValueType t, int depth, bool nested) {
    GgufValue v;
    v.type = t;
    if (t == GgufValueType::STRING) v.str = random_string(rng, 40, rng() % 2);
    else if (t == GgufValueType::F32 || t == GgufValueType::F64) v.f = random_float(rng, t);
    else if (t == GgufValueType::ARRAY) {
        const bool deeper = nested && depth < 3 && rng() % 3 == 0;
        const GgufValueType elem = deeper ? GgufValueType::ARRAY : kScalarTypes[rng() % std::size(kScalarTypes)];
        return random_array(rng, elem, depth, nested);
    } else v.i = random_int(rng, t);
    return v;
}

inline GgufValue random_array(std::mt19937_64& rng, GgufValueType elem, int depth, bool nested) {
    GgufValue v;
    v.type = GgufValueType::ARRAY;
    v.elem_type = elem;
    // Arrays of arrays stay short so three levels do not multiply into a huge header.
    const size_t n = rng() % 4 == 0 ? 0 : rng() % (elem == GgufValueType::ARRAY ? 4 : 40);
    for (size_t i = 0; i < n; ++i) {
        if (elem == GgufValueType::ARRAY) v.arrays.push_back(random_value(rng, GgufValueType::ARRAY, depth + 1, nested));
        else if (elem == GgufValueType::STRING) v.strings.push_back(random_string(rng, 12, rng() % 2));
        else if (elem == GgufValueType::F32 || elem == GgufValueType::F64) v.floats.push_back(random_float(rng, elem));
        else v.ints.push_back(random_int(rng, elem));
    }
    return v;
}

// Every type ggml defines, each with a shape whose rows are whole blocks.
inline std::vector<GgmlType> all_ggml_types() {
    std::vector<GgmlType> out;
    for (uint32_t id = 0; id < 64; ++id)
        if (ggml_type_traits(id)) out.push_back(static_cast<GgmlType>(id));
    return out;
}

inline RandomTensor random_tensor(std::mt19937_64& rng, const std::string& name, const RandomOptions& o) {
    static const std::vector<GgmlType> types = all_ggml_types();
    RandomTensor t;
    t.name = name;
    t.type = types[rng() % types.size()];
    const auto& tr = ggml_type_traits(t.type);
    const int n_dims = 1 + static_cast<int>(rng() % 4);
    t.ne.push_back(tr.block_elems * static_cast<int64_t>(1 + rng() % (tr.block_elems == 1 ? 40 : 3)));
    for (int d = 1; d < n_dims; ++d) t.ne.push_back(static_cast<int64_t>(1 + rng() % 3));
    if (!o.trailing_ones)
        while (t.ne.size() > 1 && t.ne.back() == 1) t.ne.pop_back();
    if (o.empty_tensors && rng() % 10 == 0) t.ne.back() = 0;  // empty tensors are legal
    if (!o.trailing_ones && t.ne.size() > 1 && t.ne.back() == 0) t.ne.back() = 2;
    size_t elems = 1;
    for (auto n : t.ne) elems *= static_cast<size_t>(n);
    t.bytes.resize(elems / tr.block_elems * tr.block_bytes);
    for (auto& b : t.bytes) b = static_cast<uint8_t>(rng());
    return t;
}

inline RandomGguf random_gguf(std::mt19937_64& rng, const RandomOptions& o = {}) {
    RandomGguf g;
    if (o.any_alignment) {
        static const uint64_t als[] = {1, 2, 8, 16, 32, 32, 32, 64, 128, 256, 4096};
        g.alignment = als[rng() % std::size(als)];
    }
    g.kv.emplace_back("general.architecture", GgufValue::string("test" + std::to_string(rng() % 100)));
    const int n_kv = static_cast<int>(rng() % (o.max_kv + 1));
    for (int k = 0; k < n_kv; ++k) {
        const int pick = static_cast<int>(rng() % (std::size(kScalarTypes) + 4));
        const GgufValueType t = pick < static_cast<int>(std::size(kScalarTypes)) ? kScalarTypes[pick] : GgufValueType::ARRAY;
        g.kv.emplace_back("test.key" + std::to_string(k) + "." + random_string(rng, 8, false),
                          random_value(rng, t, 0, o.nested_arrays));
    }
    const int n_t = static_cast<int>(rng() % (o.max_tensors + 1));
    for (int i = 0; i < n_t; ++i) g.tensors.push_back(random_tensor(rng, "blk." + std::to_string(i) + ".weight", o));
    return g;
}

inline GgufWriter make_writer(const RandomGguf& g) {
    GgufWriter w(g.alignment);
    for (const auto& [k, v] : g.kv) w.set(k, v);
    for (const auto& t : g.tensors) w.add_tensor_bytes(t.name, t.type, t.ne, t.bytes);
    return w;
}

// Exact equality, floats by bit pattern after narrowing to the stored width.
inline bool same_float(GgufValueType t, double a, double b) {
    if (t == GgufValueType::F32) return std::bit_cast<uint32_t>(static_cast<float>(a)) == std::bit_cast<uint32_t>(static_cast<float>(b));
    return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

// Empty when equal, else a description of the first difference.
inline std::string value_difference(const GgufValue& a, const GgufValue& b) {
    std::ostringstream d;
    if (a.type != b.type) { d << "type " << gguf_value_type_name(a.type) << " vs " << gguf_value_type_name(b.type); return d.str(); }
    switch (a.type) {
        case GgufValueType::STRING: return a.str == b.str ? "" : "string differs";
        case GgufValueType::F32: case GgufValueType::F64:
            if (!same_float(a.type, a.f, b.f)) d << "float " << a.f << " vs " << b.f;
            return d.str();
        case GgufValueType::ARRAY: break;
        default:
            if (a.i != b.i) d << "int " << a.i << " vs " << b.i;
            return d.str();
    }
    if (a.elem_type != b.elem_type) return "array element type differs";
    if (a.array_size() != b.array_size()) {
        d << "array size " << a.array_size() << " vs " << b.array_size();
        return d.str();
    }
    for (size_t i = 0; i < a.array_size(); ++i) {
        std::string e;
        switch (a.elem_type) {
            case GgufValueType::STRING: if (a.strings[i] != b.strings[i]) e = "string differs"; break;
            case GgufValueType::ARRAY: e = value_difference(a.arrays[i], b.arrays[i]); break;
            case GgufValueType::F32: case GgufValueType::F64:
                if (!same_float(a.elem_type, a.floats[i], b.floats[i])) e = "float differs"; break;
            default: if (a.ints[i] != b.ints[i]) e = std::to_string(a.ints[i]) + " vs " + std::to_string(b.ints[i]); break;
        }
        if (!e.empty()) return "element " + std::to_string(i) + ": " + e;
    }
    return "";
}

}  // namespace ds4::testing

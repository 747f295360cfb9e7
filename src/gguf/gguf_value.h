// GGUF metadata values: every scalar type, strings and (nested) arrays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds4 {

enum class GgufValueType : uint32_t {
    U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
    STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};

const char* gguf_value_type_name(GgufValueType t);
bool gguf_value_type_valid(uint32_t t);
bool gguf_value_type_is_integer(GgufValueType t);  // incl. BOOL
size_t gguf_value_type_size(GgufValueType t);      // scalar size; 0 for STRING/ARRAY

// One value. Scalars keep their declared type so a writer can round-trip them.
// Integers (and bools) live in `i` (u64 as its bit pattern), floats in `f`.
struct GgufValue {
    GgufValueType type = GgufValueType::U32;
    int64_t i = 0;
    double f = 0.0;
    std::string str;

    // Arrays: element type plus exactly one filled vector, chosen by it.
    GgufValueType elem_type = GgufValueType::U8;
    std::vector<int64_t> ints;           // integer/bool elements
    std::vector<double> floats;          // F32/F64 elements
    std::vector<std::string> strings;    // STRING elements
    std::vector<GgufValue> arrays;       // ARRAY elements (nested)

    size_t array_size() const;

    static GgufValue u32(uint32_t v) { GgufValue x; x.type = GgufValueType::U32; x.i = v; return x; }
    static GgufValue i32(int32_t v) { GgufValue x; x.type = GgufValueType::I32; x.i = v; return x; }
    static GgufValue u64(uint64_t v) { GgufValue x; x.type = GgufValueType::U64; x.i = static_cast<int64_t>(v); return x; }
    static GgufValue f32(float v) { GgufValue x; x.type = GgufValueType::F32; x.f = v; return x; }
    static GgufValue boolean(bool v) { GgufValue x; x.type = GgufValueType::BOOL; x.i = v; return x; }
    static GgufValue string(std::string v) { GgufValue x; x.type = GgufValueType::STRING; x.str = std::move(v); return x; }
    static GgufValue string_array(std::vector<std::string> v);
    static GgufValue int_array(GgufValueType elem, std::vector<int64_t> v);
    static GgufValue float_array(GgufValueType elem, std::vector<double> v);
};

}  // namespace ds4

#include "gguf/gguf_value.h"

namespace ds4 {

const char* gguf_value_type_name(GgufValueType t) {
    switch (t) {
        case GgufValueType::U8: return "u8";
        case GgufValueType::I8: return "i8";
        case GgufValueType::U16: return "u16";
        case GgufValueType::I16: return "i16";
        case GgufValueType::U32: return "u32";
        case GgufValueType::I32: return "i32";
        case GgufValueType::F32: return "f32";
        case GgufValueType::BOOL: return "bool";
        case GgufValueType::STRING: return "string";
        case GgufValueType::ARRAY: return "array";
        case GgufValueType::U64: return "u64";
        case GgufValueType::I64: return "i64";
        case GgufValueType::F64: return "f64";
    }
    return "?";
}

bool gguf_value_type_valid(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::F64); }

bool gguf_value_type_is_integer(GgufValueType t) {
    return t != GgufValueType::F32 && t != GgufValueType::F64 && t != GgufValueType::STRING &&
           t != GgufValueType::ARRAY;
}

size_t gguf_value_type_size(GgufValueType t) {
    switch (t) {
        case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::BOOL: return 1;
        case GgufValueType::U16: case GgufValueType::I16: return 2;
        case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
        case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64: return 8;
        case GgufValueType::STRING: case GgufValueType::ARRAY: return 0;
    }
    return 0;
}

size_t GgufValue::array_size() const {
    if (type != GgufValueType::ARRAY) return 0;
    switch (elem_type) {
        case GgufValueType::STRING: return strings.size();
        case GgufValueType::ARRAY: return arrays.size();
        case GgufValueType::F32: case GgufValueType::F64: return floats.size();
        default: return ints.size();
    }
}

GgufValue GgufValue::string_array(std::vector<std::string> v) {
    GgufValue x;
    x.type = GgufValueType::ARRAY;
    x.elem_type = GgufValueType::STRING;
    x.strings = std::move(v);
    return x;
}

GgufValue GgufValue::int_array(GgufValueType elem, std::vector<int64_t> v) {
    GgufValue x;
    x.type = GgufValueType::ARRAY;
    x.elem_type = elem;
    x.ints = std::move(v);
    return x;
}

GgufValue GgufValue::float_array(GgufValueType elem, std::vector<double> v) {
    GgufValue x;
    x.type = GgufValueType::ARRAY;
    x.elem_type = elem;
    x.floats = std::move(v);
    return x;
}

}  // namespace ds4

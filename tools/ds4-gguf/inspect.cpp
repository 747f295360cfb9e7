#include "inspect.h"

#include <cinttypes>
#include <cstdio>
#include <map>
#include <string>

#include "gguf/gguf_file.h"
#include "inspect_deepseek4.h"
#include "mapping/model_map.h"

namespace ds4 {

namespace {

constexpr size_t kMaxShownChars = 72;  // of a string value
constexpr size_t kShownItems = 5;      // of an array

// A string made safe for one terminal line: escapes, and shortened.
std::string printable(const std::string& s, size_t max_chars = kMaxShownChars) {
    std::string out = "\"";
    size_t shown = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        if (shown >= max_chars) {
            out += "\"... (" + std::to_string(s.size()) + " bytes)";
            return out;
        }
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else if (c == '"' || c == '\\') out += std::string("\\") + static_cast<char>(c);
        else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);  // UTF-8 passes through
        }
        ++shown;
    }
    return out + "\"";
}

std::string float_text(double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

std::string scalar_text(const GgufValue& v) {
    switch (v.type) {
        case GgufValueType::STRING: return printable(v.str);
        case GgufValueType::BOOL: return v.i ? "true" : "false";
        case GgufValueType::F32:
        case GgufValueType::F64: return float_text(v.f);
        case GgufValueType::U64: return std::to_string(static_cast<uint64_t>(v.i));
        default: return std::to_string(v.i);
    }
}

std::string value_text(const GgufValue& v) {
    if (v.type != GgufValueType::ARRAY) return scalar_text(v);
    const size_t n = v.array_size();
    std::string out = "[";
    for (size_t i = 0; i < n && i < kShownItems; ++i) {
        if (i) out += ", ";
        switch (v.elem_type) {
            case GgufValueType::STRING: out += printable(v.strings[i], 24); break;
            case GgufValueType::F32:
            case GgufValueType::F64: out += float_text(v.floats[i]); break;
            case GgufValueType::ARRAY: out += "array[" + std::to_string(v.arrays[i].array_size()) + "]"; break;
            case GgufValueType::BOOL: out += v.ints[i] ? "true" : "false"; break;
            case GgufValueType::U64: out += std::to_string(static_cast<uint64_t>(v.ints[i])); break;
            default: out += std::to_string(v.ints[i]); break;
        }
    }
    if (n > kShownItems) out += ", ...";
    return out + "]";
}

std::string type_text(const GgufValue& v) {
    if (v.type != GgufValueType::ARRAY) return gguf_value_type_name(v.type);
    return std::string("array[") + gguf_value_type_name(v.elem_type) + "] x" + std::to_string(v.array_size());
}

std::string shape_text(const GgufTensorInfo& t) {
    std::string s;
    for (uint32_t d = 0; d < std::max<uint32_t>(t.n_dims, 1); ++d) {
        if (d) s += " x ";
        s += std::to_string(t.ne[d]);
    }
    return s;
}

std::string bytes_text(uint64_t b) {
    char buf[48];
    if (b >= (uint64_t{1} << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / 1073741824.0);
    else if (b >= (uint64_t{1} << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", b / 1048576.0);
    else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.2f KiB", b / 1024.0);
    else std::snprintf(buf, sizeof buf, "%" PRIu64 " B", b);
    return buf;
}

}  // namespace

namespace {

// The family inspect table: what `ds4-gguf inspect` adds for a family whose
// layout has more to say than the tensor table (one entry per family).
struct FamilyInspector {
    const char* arch;
    void (*inspect)(const GgufFile&, std::ostream&);
};
constexpr FamilyInspector kFamilyInspectors[] = {
    {"deepseek4", inspect_deepseek4},
};

}  // namespace

void inspect_gguf(const std::string& path, std::ostream& out) {
    auto file = GgufFile::open(path);

    out << "file: " << path << "\n";
    out << "gguf version " << file->version() << ", alignment " << file->alignment() << ", tensor data at byte "
        << file->data_offset() << ", file size " << file->file_size() << " (" << bytes_text(file->file_size()) << ")\n";

    const auto& kv = file->metadata();
    out << "\nmetadata: " << kv.size() << " keys\n";
    size_t key_w = 0;
    for (const auto& [k, v] : kv) key_w = std::max(key_w, k.size());
    for (const auto& [k, v] : kv) {
        (void)v;
        out << "  " << pad(k, key_w) << "  " << pad(type_text(v), 22) << "  " << value_text(v) << "\n";
    }

    const auto& tensors = file->tensors();
    out << "\ntensors: " << tensors.size() << "\n";
    size_t name_w = 4, shape_w = 5;
    for (const auto& t : tensors) {
        name_w = std::max(name_w, t.name.size());
        shape_w = std::max(shape_w, shape_text(t).size());
    }
    out << "  " << pad("name", name_w) << "  " << pad("type", 8) << "  " << pad("shape", shape_w) << "  "
        << pad("size", 12) << "  offset\n";
    struct Total {
        size_t count = 0;
        int64_t elements = 0;
        uint64_t bytes = 0;
    };
    std::map<std::string, Total> by_type;
    for (const auto& t : tensors) {
        const std::string type(ggml_type_name(t.type));
        out << "  " << pad(t.name, name_w) << "  " << pad(type, 8) << "  " << pad(shape_text(t), shape_w) << "  "
            << pad(bytes_text(t.nbytes), 12) << "  " << t.file_offset << "\n";
        Total& tot = by_type[type];
        ++tot.count;
        tot.elements += t.n_elements();
        tot.bytes += t.nbytes;
    }

    out << "\ntotals by type:\n";
    Total all;
    for (const auto& [type, tot] : by_type) {
        out << "  " << pad(type, 8) << "  " << pad(std::to_string(tot.count) + " tensors", 14) << "  "
            << pad(std::to_string(tot.elements) + " elements", 24) << "  " << bytes_text(tot.bytes) << "\n";
        all.count += tot.count;
        all.elements += tot.elements;
        all.bytes += tot.bytes;
    }
    out << "  " << pad("all", 8) << "  " << pad(std::to_string(all.count) + " tensors", 14) << "  "
        << pad(std::to_string(all.elements) + " elements", 24) << "  " << bytes_text(all.bytes) << "\n";

    if (const GgufValue* arch = file->find("general.architecture"); arch && arch->type == GgufValueType::STRING)
        for (const FamilyInspector& f : kFamilyInspectors)
            if (arch->str == f.arch) f.inspect(*file, out);

    // What a process running the whole model would make resident.
    auto map = ModelMap::build(*file, MapSelection{});
    out << "\n" << map->summary() << "\n";
}

std::string pad(std::string s, size_t w) {
    if (s.size() < w) s.append(w - s.size(), ' ');
    return s;
}

}  // namespace ds4

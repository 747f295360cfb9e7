// Python json.dumps(ensure_ascii=False) for chat templates' `tojson`.
#include "chat/python_json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "common/error.h"

namespace ds4 {
namespace {

void append_string(const std::string& s, std::string& out) {
    out += '"';
    for (unsigned char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += char(c);  // UTF-8 bytes pass through (ensure_ascii=False)
                }
        }
    }
    out += '"';
}

void append(const nlohmann::ordered_json& v, std::string& out) {
    using Type = nlohmann::ordered_json::value_t;
    switch (v.type()) {
        case Type::null: out += "null"; break;
        case Type::boolean: out += v.get<bool>() ? "true" : "false"; break;
        case Type::number_integer: out += std::to_string(v.get<int64_t>()); break;
        case Type::number_unsigned: out += std::to_string(v.get<uint64_t>()); break;
        case Type::number_float: out += python_float_repr(v.get<double>()); break;
        case Type::string: append_string(v.get_ref<const std::string&>(), out); break;
        case Type::array: {
            out += '[';
            bool first = true;
            for (const auto& item : v) {
                if (!first) out += ", ";
                first = false;
                append(item, out);
            }
            out += ']';
            break;
        }
        case Type::object: {
            out += '{';
            bool first = true;
            for (const auto& [key, item] : v.items()) {
                if (!first) out += ", ";
                first = false;
                append_string(key, out);
                out += ": ";
                append(item, out);
            }
            out += '}';
            break;
        }
        default: throw Error("cannot write a binary JSON value as template text.");
    }
}

}  // namespace

std::string python_float_repr(double value) {
    // Python's json.dumps spells these out; JSON text never carries them.
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
    // Shortest round-trip digits in scientific form, e.g. "-1.2345e+02".
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
    std::string sci(buf, end);
    std::string sign;
    if (sci[0] == '-') {
        sign = "-";
        sci.erase(0, 1);
    }
    size_t e = sci.find('e');
    int exponent = std::stoi(sci.substr(e + 1));
    std::string digits;
    for (char c : sci.substr(0, e)) {
        if (c != '.') digits += c;
    }
    // repr switches to exponent notation below 1e-4 and from 1e16 on.
    if (exponent < -4 || exponent >= 16) {
        std::string mantissa = digits.substr(0, 1);
        if (digits.size() > 1) mantissa += "." + digits.substr(1);
        char exp_buf[16];
        std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
        return sign + mantissa + exp_buf;
    }
    std::string fixed;
    if (exponent < 0) {
        fixed = "0." + std::string(size_t(-exponent - 1), '0') + digits;
    } else if (size_t(exponent) + 1 >= digits.size()) {
        fixed = digits + std::string(size_t(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
        fixed = digits.substr(0, size_t(exponent) + 1) + "." + digits.substr(size_t(exponent) + 1);
    }
    return sign + fixed;
}

std::string python_json_dumps(const nlohmann::ordered_json& value) {
    std::string out;
    append(value, out);
    return out;
}

}  // namespace ds4

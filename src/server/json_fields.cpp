#include "server/json_fields.h"

#include <cmath>
#include <limits>

#include "server/api_error.h"

namespace ds4 {

void bad_field(const std::string& param, const std::string& message) { throw ApiError(400, message, param); }

json parse_json_object(const std::string& body) {
    // nlohmann's parser ends the input at a NUL byte, which valid JSON never
    // holds raw: "{...}\0anything" would pass.
    if (body.find('\0') != std::string::npos) throw ApiError(400, "the request body is not valid JSON.");
    json j;
    try {
        j = json::parse(body);
    } catch (const json::exception&) {
        // Syntax errors, and numbers out of every range (out_of_range 406).
        throw ApiError(400, "the request body is not valid JSON.");
    }
    if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object.");
    return j;
}

bool present(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

double number_field(const json& j, const std::string& key, double lo, double hi) {
    const json& v = j.at(key);
    if (!v.is_number()) bad_field(key, "'" + key + "' must be a number.");
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < lo || d > hi)
        bad_field(key, "'" + key + "' must be between " + json(lo).dump() + " and " + json(hi).dump() + ".");
    return d;
}

int64_t integer_field(const json& j, const std::string& key, int64_t lo, int64_t hi, const std::string& where) {
    const std::string& w = where.empty() ? key : where;
    const json& v = j.at(key);
    if (!v.is_number_integer()) bad_field(w, "'" + w + "' must be an integer.");
    const int64_t i = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())
                          ? std::numeric_limits<int64_t>::max()
                          : v.get<int64_t>();
    if (i < lo || i > hi) bad_field(w, "'" + w + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ".");
    return i;
}

bool boolean_field(const json& j, const std::string& key, const std::string& where) {
    const std::string& w = where.empty() ? key : where;
    const json& v = j.at(key);
    if (!v.is_boolean()) bad_field(w, "'" + w + "' must be true or false.");
    return v.get<bool>();
}

std::string string_field(const json& j, const std::string& key, const std::string& where) {
    const std::string& w = where.empty() ? key : where;
    const json& v = j.at(key);
    if (!v.is_string()) bad_field(w, "'" + w + "' must be a string.");
    return v.get<std::string>();
}

}  // namespace ds4

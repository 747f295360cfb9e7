// Checked reads of request fields, shared by the OpenAI and Anthropic
// parsers: each problem is an ApiError(400) whose sentence and `param` name
// the field, so both APIs word their refusals the same way.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace ds4 {

using json = nlohmann::json;

[[noreturn]] void bad_field(const std::string& param, const std::string& message);

// The body as a JSON object (400 for bad JSON, numbers beyond every range
// included, or another JSON value).
json parse_json_object(const std::string& body);

// Whether `key` is there and not null (null means "not given" in both APIs).
bool present(const json& j, const char* key);

// The field's value, checked: a finite number in [lo, hi], an integer in
// [lo, hi], a boolean, a string. `where` names the field in messages
// (defaults to `key`).
double number_field(const json& j, const std::string& key, double lo, double hi);
int64_t integer_field(const json& j, const std::string& key, int64_t lo, int64_t hi, const std::string& where = {});
bool boolean_field(const json& j, const std::string& key, const std::string& where = {});
std::string string_field(const json& j, const std::string& key, const std::string& where = {});

}  // namespace ds4

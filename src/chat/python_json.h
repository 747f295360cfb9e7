// JSON text the way Python's json.dumps(value, ensure_ascii=False) writes it,
// which is what Hugging Face's `tojson` filter produces inside chat
// templates: ", " and ": " separators, keys in insertion order, non-ASCII
// characters as they are, floats as Python's repr (1.0, 1e-05, 1e+16).
// Templates were trained on this exact text, so nlohmann's dump() (no
// spaces, other float spellings) will not do.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ds4 {

std::string python_json_dumps(const nlohmann::ordered_json& value);

// Python's repr() of a finite double (shortest round-trip digits; fixed
// notation for decimal exponents -4..15, otherwise d.ddde+XX).
std::string python_float_repr(double value);

}  // namespace ds4

// `ds4-gguf inspect FILE`: what a GGUF file holds and how ds4 would map it.
#pragma once

#include <ostream>
#include <string>

namespace ds4 {

// Prints metadata (arrays summarized), the tensor table, totals by type and
// the model map summary for the whole file. Throws ds4::Error (the loader's
// sentence) for a file that cannot be opened or is not valid GGUF.
void inspect_gguf(const std::string& path, std::ostream& out);

// s padded with spaces to w characters: the tables' columns.
std::string pad(std::string s, size_t w);

}  // namespace ds4

// A routing profile: how often each (layer, expert) was routed to, recorded
// by one run (--ssd-streaming-profile FILE) so the next run of the same
// model can preload its hottest experts before the first token instead of
// missing on them. A text file: a header naming the model, one line per
// expert, "layer expert count", and a trailer "end N" (N lines), so a file
// cut short reads as damaged, not as smaller counts.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ds4 {

using ExpertCounts = std::vector<std::pair<std::pair<int, int64_t>, uint64_t>>;

// The counts in `path` for the model `identity`. An absent file is an empty
// profile; a file of another model, or one that does not parse, is empty
// too, with `warning` set to one sentence saying why.
ExpertCounts read_routing_profile(const std::string& path, const std::string& identity, std::string& warning);

// Writes `counts` (added to what the file already holds for this model)
// through a temporary file and a rename, so a crash leaves the old profile
// whole. Throws ds4::Error when it cannot write.
void write_routing_profile(const std::string& path, const std::string& identity, const ExpertCounts& counts);

// The (layer, expert) pairs by count, most used first.
std::vector<std::pair<int, int64_t>> hottest_first(const ExpertCounts& counts);

}  // namespace ds4

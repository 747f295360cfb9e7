// /metrics series of the expert cache (--ssd-streaming): lookups, hits,
// misses, evictions, full-layer reads, bytes read and time spent reading,
// as Prometheus counters.
#pragma once

#include <string>

#include "experts/expert_source.h"

namespace ds4 {

std::string expert_cache_prometheus(const ExpertSourceStats& s);

}  // namespace ds4

#include "server/expert_metrics.h"

#include <cstdio>

namespace ds4 {

std::string expert_cache_prometheus(const ExpertSourceStats& s) {
    struct Counter {
        const char* name;
        const char* help;
        double value;
    };
    const Counter counters[] = {
        {"ds4_expert_cache_lookups_total", "Distinct (block, expert) requests served per expert.", double(s.lookups)},
        {"ds4_expert_cache_hits_total", "Lookups found in the expert cache.", double(s.hits)},
        {"ds4_expert_cache_misses_total", "Lookups not in the expert cache's device (or RAM) slots.", double(s.misses)},
        {"ds4_expert_cache_host_hits_total", "Misses copied from the host-RAM tier instead of read from the file.",
         double(s.host_hits)},
        {"ds4_expert_cache_evictions_total", "Misses that replaced a cached expert (expert windows: demotions).",
         double(s.evictions)},
        {"ds4_expert_cache_promotions_total", "Experts moved into device memory between steps (expert windows).",
         double(s.promotions)},
        {"ds4_expert_cache_scratch_loads_total", "Misses served from a scratch slot without caching.", double(s.scratch_loads)},
        {"ds4_expert_cache_full_layer_reads_total", "Steps that read a block's whole routed tensors.", double(s.full_layer_reads)},
        {"ds4_expert_cache_read_bytes_total", "Bytes of routed experts read from the model file.", double(s.bytes_read)},
        {"ds4_expert_cache_read_seconds_total", "Wall time expert reads were in flight.", s.read_seconds},
        {"ds4_expert_cache_stall_seconds_total", "Wall time steps waited on expert reads (less than the reads' where "
                                                 "they overlap compute).", s.stall_seconds},
    };
    std::string out;
    char line[160];
    for (const Counter& c : counters) {
        out += std::string("# HELP ") + c.name + " " + c.help + "\n# TYPE " + c.name + " counter\n";
        std::snprintf(line, sizeof line, "%s %.17g\n", c.name, c.value);
        out += line;
    }
    return out;
}

}  // namespace ds4

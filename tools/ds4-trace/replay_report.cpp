#include "replay_report.h"

#include <cstdio>

namespace ds4 {

namespace {

double pct(int64_t part, int64_t whole) { return whole > 0 ? 100.0 * double(part) / double(whole) : 0.0; }

}  // namespace

std::string replay_line(const ReplayResult& r, uint64_t bytes_per_expert) {
    const ExpertSourceStats& c = r.counts;
    char line[640];
    int n = std::snprintf(
        line, sizeof line,
        "replay: %llu tokens, %lld experts; device %lld slots (%.1f%%) + %lld scratch, host %lld slots (%.1f%%): "
        "%llu lookups, device hits %.2f%%, host hits %.2f%%, device+host %.2f%%; %.3f misses per token "
        "(%.3f from the disk), %llu evictions, %llu to scratch, %llu full-layer steps",
        static_cast<unsigned long long>(r.tokens), static_cast<long long>(r.total_experts),
        static_cast<long long>(r.device_slots), pct(r.device_slots, r.total_experts),
        static_cast<long long>(r.scratch_slots), static_cast<long long>(r.host_slots),
        pct(r.host_slots, r.total_experts), static_cast<unsigned long long>(c.lookups), 100.0 * r.device_hit_rate(),
        100.0 * r.host_hit_rate(), 100.0 * r.hit_rate(), r.misses_per_token(), r.disk_reads_per_token(),
        static_cast<unsigned long long>(c.evictions), static_cast<unsigned long long>(c.scratch_loads),
        static_cast<unsigned long long>(r.whole_steps));
    if (bytes_per_expert > 0 && n > 0 && size_t(n) < sizeof line)
        std::snprintf(line + n, sizeof line - size_t(n), "; %.1f MiB per token from the disk at %.2f MiB per expert",
                      r.disk_reads_per_token() * double(bytes_per_expert) / double(1 << 20),
                      double(bytes_per_expert) / double(1 << 20));
    return line;
}

nlohmann::json replay_json(const ReplayResult& r, uint64_t bytes_per_expert, const std::string& trace_source) {
    const ExpertSourceStats& c = r.counts;
    nlohmann::json j;
    j["trace_source"] = trace_source;
    j["tokens"] = r.tokens;
    j["routes"] = r.routes;
    j["total_experts"] = r.total_experts;
    j["device_slots"] = r.device_slots;
    j["scratch_slots"] = r.scratch_slots;
    j["host_slots"] = r.host_slots;
    j["lookups"] = c.lookups;
    j["hits"] = c.hits;
    j["misses"] = c.misses;
    j["host_hits"] = c.host_hits;
    j["disk_reads"] = c.misses - c.host_hits;
    j["evictions"] = c.evictions;
    j["scratch_loads"] = c.scratch_loads;
    j["full_layer_steps"] = r.whole_steps;
    j["device_hit_rate"] = r.device_hit_rate();
    j["host_hit_rate"] = r.host_hit_rate();
    j["hit_rate"] = r.hit_rate();
    j["misses_per_token"] = r.misses_per_token();
    j["disk_reads_per_token"] = r.disk_reads_per_token();
    if (bytes_per_expert > 0) {
        j["bytes_per_expert"] = bytes_per_expert;
        // Every device miss crosses to the device (from the host tier or a
        // staging buffer); only the host tier's misses come from the disk.
        j["disk_bytes_per_token"] = r.disk_reads_per_token() * double(bytes_per_expert);
        j["device_fill_bytes_per_token"] = r.misses_per_token() * double(bytes_per_expert);
    }
    return j;
}

}  // namespace ds4

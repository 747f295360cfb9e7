// Writes a routing trace (experts/routing_trace.h) while a run goes: the
// header at once, a route line per step the expert cache serves, the
// trailer at finish(). A run that dies first leaves a file without its
// trailer, which a reader refuses as cut short rather than replaying a
// run that never ended.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "experts/cache_policy.h"

namespace ds4 {

class RoutingTraceWriter {
public:
    // Creates `path` (replacing it) and writes the header. Throws ds4::Error
    // when it cannot.
    RoutingTraceWriter(const std::string& path, const std::string& source, const std::vector<PolicyBlock>& blocks,
                       int64_t experts_per_token);
    ~RoutingTraceWriter();
    RoutingTraceWriter(const RoutingTraceWriter&) = delete;
    RoutingTraceWriter& operator=(const RoutingTraceWriter&) = delete;

    // One step of `layer`: `rows` tokens of `used` ids each. Throws
    // ds4::Error when `used` is not the header's experts per token or the
    // file cannot be written.
    void record(int layer, int64_t rows, int64_t used, const std::vector<int32_t>& ids);
    // Writes the trailer and closes; throws ds4::Error when any write
    // failed. Later calls do nothing.
    void finish();

private:
    void check(bool ok);
    std::string path_;
    std::FILE* out_ = nullptr;
    int64_t used_ = 0;
    uint64_t routes_ = 0;
};

}  // namespace ds4

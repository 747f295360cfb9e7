#include "experts/routing_trace_writer.h"

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "experts/routing_trace.h"

namespace ds4 {

RoutingTraceWriter::RoutingTraceWriter(const std::string& path, const std::string& source,
                                       const std::vector<PolicyBlock>& blocks, int64_t experts_per_token)
    : path_(path), used_(experts_per_token) {
    out_ = std::fopen(path.c_str(), "wb");
    if (!out_) throw Error("cannot write the routing trace " + path + ": " + std::strerror(errno) + ".");
    const std::string h = trace_header(source, experts_per_token, blocks);
    check(std::fwrite(h.data(), 1, h.size(), out_) == h.size());
}

RoutingTraceWriter::~RoutingTraceWriter() {
    if (out_) std::fclose(out_);  // no trailer: the file reads as cut short
}

void RoutingTraceWriter::check(bool ok) {
    if (ok) return;
    const int e = errno;
    if (out_) std::fclose(out_);
    out_ = nullptr;
    throw Error("cannot write the routing trace " + path_ + ": " + std::strerror(e) + ".");
}

void RoutingTraceWriter::record(int layer, int64_t rows, int64_t used, const std::vector<int32_t>& ids) {
    if (!out_) return;
    if (used != used_)
        throw Error("a step routed to " + std::to_string(used) + " experts per token, the routing trace " + path_ +
                    " records " + std::to_string(used_) + ".");
    const std::string line = trace_route_line(layer, rows, ids.data(), ids.size());
    check(std::fwrite(line.data(), 1, line.size(), out_) == line.size());
    ++routes_;
}

void RoutingTraceWriter::finish() {
    if (!out_) return;
    const std::string end = "end " + std::to_string(routes_) + "\n";
    check(std::fwrite(end.data(), 1, end.size(), out_) == end.size());
    const bool ok = std::fflush(out_) == 0;
    check(ok);
    const bool closed = std::fclose(out_) == 0;
    out_ = nullptr;
    if (!closed) throw Error("cannot write the routing trace " + path_ + ": " + std::strerror(errno) + ".");
}

}  // namespace ds4

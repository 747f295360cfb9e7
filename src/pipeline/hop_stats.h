// Per-hop telemetry of a coordinator's route, summed over every step since
// start, for ds4-server's /metrics (Prometheus text): per hop (its index
// along the route, its worker's address and layers; hop 0 is the
// coordinator itself) the steps, rows, eval / downstream-wait / send time as
// histograms, and bytes in and out. Fed by the route's telemetry sink from
// whichever thread collects a step; read from the HTTP threads.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace ds4 {

struct RouteTelemetry;  // pipeline/remote_stages.h (gRPC stays out of this header)

class HopStats {
public:
    // How the coordinator's own slice reads ("blocks 0..3"), for hop 0's label.
    void set_self_layers(std::string layers) {
        std::lock_guard<std::mutex> lock(mu_);
        self_layers_ = std::move(layers);
    }
    void record(const RouteTelemetry& t);
    // The exposition text of every series (empty before the first step).
    std::string prometheus() const;

    // Upper bounds in seconds of the time histograms (+Inf is added): a
    // loopback hop takes a fraction of a millisecond, a CPU prefill chunk
    // seconds to minutes.
    static constexpr std::array<double, 15> kBuckets = {0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                        0.1,    0.25,   0.5,   1,      2.5,    10,    60};

private:
    struct Histogram {
        std::array<uint64_t, kBuckets.size()> counts{};  // per bucket, not cumulative
        uint64_t count = 0;
        double sum = 0;
        void observe(double seconds);
    };
    struct Hop {
        uint64_t steps = 0, rows = 0, bytes_in = 0, bytes_out = 0;
        Histogram eval, wait, send;
    };
    using Key = std::tuple<size_t, std::string, std::string>;  // hop, address, layers
    std::string self_layers_;
    mutable std::mutex mu_;
    std::map<Key, Hop> hops_;
};

}  // namespace ds4

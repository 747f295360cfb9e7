// The server's Prometheus metrics (GET /metrics, text exposition format
// 0.0.4): requests by endpoint and status, the token counters the usage
// fields report, the scheduler's prefill and decode work, time to first
// token and inter-token latency histograms, slots in use, queue depth and
// prefix reuse. Counters are updated from the HTTP threads and the
// scheduler's thread; one mutex guards them (a few updates per token, far
// below the cost of a forward pass).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "engine/generate.h"
#include "engine/scheduler.h"

namespace ds4 {

class Metrics {
public:
    // A response sent: `endpoint` is the route ("/v1/messages"), or
    // "other" for paths the server does not serve (bounded label values).
    void count_request(const std::string& endpoint, int status);
    // A generation ended (any reason): its usage numbers.
    void record_generation(const GenerateResult& result);
    void observe_time_to_first_token(double seconds);
    void observe_inter_token_latency(double seconds);

    // The exposition text; `scheduler` is null while the model loads.
    std::string render(const std::optional<SchedulerStats>& scheduler) const;

    // Histogram bucket bounds in seconds (upper bounds; +Inf is added).
    static constexpr std::array<double, 14> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                         1,     2.5,  5,     10,   30,  60,  120};

private:
    struct Histogram {
        std::array<uint64_t, kBuckets.size()> counts{};  // per bucket, not cumulative
        uint64_t count = 0;
        double sum = 0;
        void observe(double v);
        void render(std::string& out, const char* name, const char* help) const;
    };

    mutable std::mutex mu_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;
    uint64_t generations_ = 0;
    uint64_t prompt_tokens_ = 0, cached_tokens_ = 0, generated_tokens_ = 0;
    Histogram ttft_, itl_;
};

}  // namespace ds4

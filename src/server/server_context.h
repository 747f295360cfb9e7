// What the endpoints share (internal to src/server): the engine once it is
// loaded, the scheduler, the options, the metrics; submitting a prompt and
// following its generation, whole or streamed as Server-Sent Events, with
// the one log line per request. Each API (openai_endpoints.cpp,
// anthropic_endpoints.cpp) adds only its request and response shapes.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/generate.h"
#include "engine/scheduler.h"
#include "experts/expert_source.h"
#include "server/metrics.h"
#include "server/server.h"
#include "server/tool_call_memory.h"

namespace ds4 {

class Engine;
using ServerClock = std::chrono::steady_clock;

// A piece of streamed text and the log probabilities of the tokens sampled
// since the previous piece (empty unless the request asked for them).
struct GeneratedPiece {
    std::string text;
    std::vector<SampledLogprobs> logprobs;
};

// One generation between the scheduler's thread (which pushes) and the
// HTTP thread answering it (which waits).
struct Generation {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<GeneratedPiece> pieces;
    std::vector<SampledLogprobs> logprobs;  // sampled since the last piece
    bool admitted = false;       // holds a slot (cached_tokens known)
    int64_t cached_tokens = 0;
    bool done = false;
    GenerateResult result;
    ServerClock::time_point arrived = ServerClock::now(), first_piece{}, last_piece{};
    // The expert cache's counters when the request came and when it ended
    // (--ssd-streaming): what the steps it took part in read, for its log
    // line (steps are shared with the requests batched beside it).
    ExpertSourceStats experts_before, experts_after;
};

// The API-specific text of a stream; the shared loop calls begin() once
// the request holds a slot (or ended), text() per piece (after
// logprobs() with the log probabilities of the tokens behind it, when
// the request asked for them), keep_alive() when nothing came for a
// while, end() once.
class StreamFormat {
public:
    virtual ~StreamFormat() = default;
    virtual std::string begin(int64_t cached_tokens) = 0;
    virtual void logprobs(std::span<const SampledLogprobs>) {}
    virtual std::string text(std::string_view piece) = 0;
    virtual std::string keep_alive() = 0;
    virtual std::string end(const GenerateResult& result) = 0;
};

struct ServerContext {
    explicit ServerContext(const ServerOptions& o) : opts(o) {}

    ServerOptions opts;
    // Null while the model loads; set (with the scheduler) once, before
    // requests are served.
    std::atomic<const Engine*> engine{nullptr};
    std::unique_ptr<Scheduler> scheduler;
    Metrics metrics;
    // The sampled text of recent replies' tool calls, by call id.
    ToolCallMemory tool_memory;
    std::atomic<uint64_t> next_request{1};
    // Set when a stopping server cancels what is in flight: generations
    // submitted afterwards (by requests routed before the stop) end at once.
    std::atomic<bool> cancelling{false};

    // The engine, or ApiError(503) while it loads.
    const Engine& ready() const;
    // Queues a generation; ApiError 429 (queue full, Retry-After set on
    // `res`) or 400 naming `param` (a prompt the context cannot hold, a bad
    // parameter). `sid` receives the scheduler's id (for cancel).
    std::shared_ptr<Generation> submit(std::vector<int32_t> prompt, const GenerateOptions& options,
                                       const std::string& param, httplib::Response& res, uint64_t& sid);
    // Blocks until the generation ends. A client that closes its
    // connection meanwhile (client_connection.h, looked at every 50 ms)
    // cancels it: then null, the request logged and answered 499 (a status
    // only /metrics and the log see).
    const GenerateResult* wait(Generation& g, uint64_t sid, uint64_t id, const httplib::Request& req,
                               httplib::Response& res) const;
    // Streams the generation as Server-Sent Events through `format`; a
    // client that goes away cancels it.
    void stream(httplib::Response& res, std::shared_ptr<Generation> g, uint64_t sid,
                std::shared_ptr<StreamFormat> format, uint64_t id, const httplib::Request& req);
    // One log line: status and, for a generation, its numbers.
    void log_request(uint64_t id, const httplib::Request& req, int status, const Generation* g) const;
};

// JSON text that survives bytes a random or cut-off model emits that are
// not UTF-8 (replaced with U+FFFD).
std::string dump_json(const nlohmann::json& j);
int64_t unix_time();

void add_openai_routes(httplib::Server& http, ServerContext& ctx);
void add_anthropic_routes(httplib::Server& http, ServerContext& ctx);
void add_responses_routes(httplib::Server& http, ServerContext& ctx);

}  // namespace ds4

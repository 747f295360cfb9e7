#include "server/server_context.h"

#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "common/log.h"
#include "server/api_error.h"
#include "server/client_connection.h"

namespace ds4 {

std::string dump_json(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

int64_t unix_time() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const Engine& ServerContext::ready() const {
    const Engine* e = engine.load(std::memory_order_acquire);
    if (!e) throw ApiError(503, "the model is still loading; retry when GET /health answers 200.");
    return *e;
}

std::shared_ptr<Generation> ServerContext::submit(std::vector<int32_t> prompt, const GenerateOptions& options,
                                                  const std::string& param, httplib::Response& res, uint64_t& sid) {
    auto g = std::make_shared<Generation>();
    const Engine& e = ready();
    g->experts_before = e.expert_stats();
    Request r;
    r.prompt = std::move(prompt);
    r.options = options;
    r.on_admit = [g](int64_t cached) {
        std::lock_guard<std::mutex> lock(g->mu);
        g->admitted = true;
        g->cached_tokens = cached;
        g->cv.notify_all();
    };
    r.on_text = [g, m = &metrics](std::string_view p) {
        const auto now = ServerClock::now();
        std::lock_guard<std::mutex> lock(g->mu);
        if (g->first_piece == ServerClock::time_point{}) {
            g->first_piece = now;
            m->observe_time_to_first_token(std::chrono::duration<double>(now - g->arrived).count());
        } else {
            m->observe_inter_token_latency(std::chrono::duration<double>(now - g->last_piece).count());
        }
        g->last_piece = now;
        g->pieces.push_back(GeneratedPiece{std::string(p), std::move(g->logprobs)});
        g->logprobs.clear();
        g->cv.notify_all();
        return true;
    };
    if (options.top_logprobs >= 0)
        r.on_logprobs = [g](const SampledLogprobs& l) {
            std::lock_guard<std::mutex> lock(g->mu);
            g->logprobs.push_back(l);
        };
    r.on_done = [g, m = &metrics, e = &e](const GenerateResult& result) {
        m->record_generation(result);  // before any response says it is done
        const ExpertSourceStats experts = e->expert_stats();
        std::lock_guard<std::mutex> lock(g->mu);
        g->experts_after = experts;
        g->result = result;
        g->done = true;
        g->cv.notify_all();
    };
    try {
        sid = scheduler->submit(std::move(r));
        // A handler that read its request before the shutdown's cancel_all()
        // may submit after it: its generation is cancelled too.
        if (cancelling.load()) scheduler->cancel(sid);
    } catch (const QueueFull& e) {
        res.set_header("Retry-After", "1");
        throw ApiError(429, e.what());
    } catch (const ApiError&) {
        throw;
    } catch (const Error& e) {
        throw ApiError(400, e.what(), param);
    }
    return g;
}

const GenerateResult* ServerContext::wait(Generation& g, uint64_t sid, uint64_t id, const httplib::Request& req,
                                          httplib::Response& res) const {
    const ClientConnection client(req);
    std::unique_lock<std::mutex> lock(g.mu);
    bool left = false;
    while (!g.cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return g.done; })) {
        if (left || !client.gone()) continue;
        left = true;
        scheduler->cancel(sid);  // the generation ends at the scheduler's next step
    }
    if (!left) return &g.result;
    lock.unlock();
    res.status = 499;
    res.set_content(error_body_for_path(req.path, 499, "the client closed the connection before the reply was complete."),
                    "application/json");
    log_request(id, req, 499, &g);
    return nullptr;
}

void ServerContext::stream(httplib::Response& res, std::shared_ptr<Generation> g, uint64_t sid,
                           std::shared_ptr<StreamFormat> format, uint64_t id, const httplib::Request& req) {
    res.set_header("Cache-Control", "no-cache");
    // 0: nothing sent, 1: streaming, 2: finished. The request outlives the
    // provider (httplib calls it while writing this response).
    auto state = std::make_shared<int>(0);
    const httplib::Request* rq = &req;
    // HTTP/1.0 knows no chunked encoding (RFC 9112 7.1: never sent to a 1.0
    // client): the events go unframed and the connection's close ends them,
    // as h11 (vLLM's HTTP layer) answers such clients. nginx's proxy_pass
    // speaks HTTP/1.0 to its upstream unless told otherwise, so refusing
    // would break streaming behind a default nginx.
    const bool close_delimited = req.version == "HTTP/1.0";
    auto provider = [this, g, sid, format, state, id, rq, close_delimited](size_t, httplib::DataSink& sink) {
        // A failed write (the client left) cancels the generation.
        auto write = [&](const std::string& s) {
            if (s.empty()) return true;
            if (!sink.is_writable() || !sink.write(s.data(), s.size())) {
                scheduler->cancel(sid);
                return false;
            }
            return true;
        };
        std::deque<GeneratedPiece> got;
        bool done = false, admitted = false, woke = false;
        int64_t cached = 0;
        {
            std::unique_lock<std::mutex> lock(g->mu);
            woke = g->cv.wait_for(lock, std::chrono::seconds(15), [&] {
                return g->done || !g->pieces.empty() || (*state == 0 && g->admitted);
            });
            got.swap(g->pieces);
            done = g->done;
            admitted = g->admitted;
            cached = g->cached_tokens;
        }
        if (*state == 0) {
            if (!admitted && !done) return write(format->keep_alive());  // still queued
            *state = 1;
            if (!write(format->begin(cached))) return false;
        }
        for (const GeneratedPiece& p : got) {
            if (!p.logprobs.empty()) format->logprobs(p.logprobs);
            if (!write(format->text(p.text))) return false;
        }
        if (!woke) return write(format->keep_alive());  // a long prefill: keep the connection
        if (!done) return true;
        write(format->end(g->result));
        log_request(id, *rq, 200, g.get());
        *state = 2;
        sink.done();
        // Failing after the last byte makes httplib close the
        // connection, which ends a close-delimited body (an HTTP/1.0
        // client may have asked to keep it alive).
        return !close_delimited;
    };
    auto released = [this, g, sid, state, id, rq](bool) {
        // The response ended. When the client went away first, the
        // generation is cancelled; it ends at the scheduler's next
        // step, and the request is logged with its reason.
        if (*state == 2) return;
        scheduler->cancel(sid);
        std::unique_lock<std::mutex> lock(g->mu);
        g->cv.wait_for(lock, std::chrono::seconds(30), [&] { return g->done; });
        if (g->done) {
            lock.unlock();
            log_request(id, *rq, 499, g.get());
        }
    };
    if (close_delimited) {
        res.set_header("Connection", "close");
        res.set_content_provider("text/event-stream", provider, released);
    } else {
        res.set_chunked_content_provider("text/event-stream", provider, released);
    }
}

void ServerContext::log_request(uint64_t id, const httplib::Request& req, int status, const Generation* g) const {
    char line[512];
    if (!g) {
        std::snprintf(line, sizeof line, "request %llu %s %s %d", static_cast<unsigned long long>(id), req.method.c_str(),
                      req.path.c_str(), status);
    } else {
        const GenerateResult& r = g->result;
        const double ttft = g->first_piece == ServerClock::time_point{}
                                ? 0.0
                                : std::chrono::duration<double>(g->first_piece - g->arrived).count();
        std::snprintf(line, sizeof line,
                      "request %llu %s %s %d: %lld prompt tokens (%lld cached), %zu generated, first token %.0f ms, %.1f t/s, %s",
                      static_cast<unsigned long long>(id), req.method.c_str(), req.path.c_str(), status,
                      static_cast<long long>(r.prompt_tokens), static_cast<long long>(r.cached_tokens), r.tokens.size(),
                      1000.0 * ttft, r.decode_seconds > 0 ? double(r.tokens.size()) / r.decode_seconds : 0.0,
                      finish_reason(r.reason));
        const ExpertSourceStats &a = g->experts_before, &b = g->experts_after;
        if (b.lookups > a.lookups || b.full_layer_reads > a.full_layer_reads) {
            // --ssd-streaming: the expert cache over the steps this request
            // took part in (shared with the requests batched beside it).
            const uint64_t lookups = b.lookups - a.lookups;
            char experts[192];
            std::snprintf(experts, sizeof experts,
                          "; experts meanwhile: %llu lookups, %.1f%% hits, %llu full-layer reads, %.1f MiB read, "
                          "steps waited %.2f s",
                          static_cast<unsigned long long>(lookups),
                          lookups ? 100.0 * double(b.hits - a.hits) / double(lookups) : 0.0,
                          static_cast<unsigned long long>(b.full_layer_reads - a.full_layer_reads),
                          double(b.bytes_read - a.bytes_read) / double(1 << 20), b.stall_seconds - a.stall_seconds);
            std::strncat(line, experts, sizeof line - std::strlen(line) - 1);
        }
    }
    log_info(line);
}

}  // namespace ds4

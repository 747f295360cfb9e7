#include "server/server.h"

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "engine/engine.h"
#include "engine/scheduler.h"
#include "models/family.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace ds4 {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Model text may end in bytes that are not UTF-8 (a byte-level token cut
// off by a limit): replaced, never a failed response.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

int64_t unix_time() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// What a scheduler request hands back to the HTTP thread waiting on it.
struct Channel {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::string> pieces;
    bool done = false;
    GenerateResult result;
    Clock::time_point first_piece{};

    void push(std::string_view p) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_piece == Clock::time_point{}) first_piece = Clock::now();
        pieces.emplace_back(p);
        cv.notify_all();
    }
    void finish(const GenerateResult& r) {
        std::lock_guard<std::mutex> lock(mu);
        result = r;
        done = true;
        cv.notify_all();
    }
};

json usage_json(const GenerateResult& r) {
    const int64_t completion = static_cast<int64_t>(r.tokens.size());
    return {{"prompt_tokens", r.prompt_tokens},
            {"completion_tokens", completion},
            {"total_tokens", r.prompt_tokens + completion},
            {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
}

}  // namespace

struct Server::Impl {
    Engine& engine;
    ServerOptions opts;
    std::unique_ptr<Scheduler> scheduler;
    httplib::Server http;
    std::thread loop;
    std::atomic<bool> stopping{false};
    std::atomic<uint64_t> next_request{1};

    Impl(Engine& e, const ServerOptions& o) : engine(e), opts(o) {
        SchedulerOptions so;
        so.n_slots = o.parallel;
        so.n_ctx = o.n_ctx;
        so.prefill_chunk = o.prefill_chunk;
        so.max_queue = o.max_queue;
        so.prefix_cache_bytes = o.cache_ram_bytes;
        scheduler = engine.new_scheduler(so);
        routes();
    }

    void send_error(httplib::Response& res, int status, const std::string& message, const std::string& param = {}) {
        res.status = status;
        res.set_content(openai_error_body(status, message, param), "application/json");
    }

    bool authorized(const httplib::Request& req) const {
        if (opts.api_keys.empty() || req.path == "/health") return true;
        std::string key;
        const std::string auth = req.get_header_value("Authorization");
        if (auth.rfind("Bearer ", 0) == 0) key = auth.substr(7);
        else key = req.get_header_value("x-api-key");
        for (const std::string& k : opts.api_keys)
            if (!key.empty() && key == k) return true;
        return false;
    }

    void routes() {
        // Enough workers for every slot's stream plus the queue's waiters.
        const size_t workers = static_cast<size_t>(opts.parallel) + std::min<size_t>(opts.max_queue, 64) + 4;
        http.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
        http.set_payload_max_length(opts.max_body_bytes);
        http.set_read_timeout(10, 0);   // a client that stalls mid-request is dropped
        http.set_write_timeout(30, 0);
        http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
            if (authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
            send_error(res, 401, "a valid API key is required (Authorization: Bearer KEY or x-api-key: KEY).");
            return httplib::Server::HandlerResponse::Handled;
        });
        // Statuses httplib sets itself (404, 413, 400 for a malformed
        // request line) get the same JSON error shape.
        http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
            if (!res.body.empty()) return;
            const std::string m = res.status == 404   ? "no endpoint " + req.method + " " + req.path + "."
                                  : res.status == 413 ? "the request body exceeds " + std::to_string(opts.max_body_bytes) + " bytes."
                                  : res.status == 405 ? "method not allowed."
                                                      : "the request could not be read.";
            send_error(res, res.status, m);
        });
        http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
            res.set_content(R"({"status":"ok"})", "application/json");
        });
        http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
            const json m = {{"id", opts.model_id}, {"object", "model"}, {"created", unix_time()}, {"owned_by", "ds4"}};
            res.set_content(dump(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
        });
        http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
            complete(req, res, true);
        });
        http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
            complete(req, res, false);
        });
    }

    std::vector<int32_t> prompt_tokens(const CompletionRequest& cr) const {
        try {
            if (cr.chat) return engine.chat_prompt(cr.messages, cr.chat_options);
            const Tokenizer& tok = engine.tokenizer();
            std::vector<int32_t> ids;
            if (tok.add_bos() && tok.bos() >= 0) ids.push_back(tok.bos());
            const auto text = tok.encode(cr.prompt, true);
            ids.insert(ids.end(), text.begin(), text.end());
            return ids;
        } catch (const ApiError&) {
            throw;
        } catch (const Error& e) {
            throw ApiError(400, e.what(), cr.chat ? "messages" : "prompt");
        }
    }

    void log_request(uint64_t id, const httplib::Request& req, int status, const GenerateResult* r, Clock::time_point t0,
                     Clock::time_point first) {
        char line[320];
        if (!r) {
            std::snprintf(line, sizeof line, "request %llu %s %s %d", static_cast<unsigned long long>(id),
                          req.method.c_str(), req.path.c_str(), status);
        } else {
            const double ttft = first == Clock::time_point{} ? 0.0 : std::chrono::duration<double>(first - t0).count();
            std::snprintf(line, sizeof line,
                          "request %llu %s %s %d: %lld prompt tokens (%lld cached), %zu generated, first token %.0f ms, %.1f t/s, %s",
                          static_cast<unsigned long long>(id), req.method.c_str(), req.path.c_str(), status,
                          static_cast<long long>(r->prompt_tokens), static_cast<long long>(r->cached_tokens),
                          r->tokens.size(), 1000.0 * ttft,
                          r->decode_seconds > 0 ? double(r->tokens.size()) / r->decode_seconds : 0.0,
                          finish_reason(r->reason));
        }
        log_info(line);
    }

    void complete(const httplib::Request& req, httplib::Response& res, bool chat) {
        const uint64_t id = next_request++;
        const auto t0 = Clock::now();
        CompletionRequest cr;
        std::shared_ptr<Channel> ch = std::make_shared<Channel>();
        uint64_t sid = 0;
        try {
            cr = parse_completion_request(req.body, chat);
            Request r;
            r.prompt = prompt_tokens(cr);
            r.options = cr.generate;
            r.on_text = [ch](std::string_view p) {
                ch->push(p);
                return true;
            };
            r.on_done = [ch](const GenerateResult& g) { ch->finish(g); };
            try {
                sid = scheduler->submit(std::move(r));
            } catch (const QueueFull& e) {
                res.set_header("Retry-After", "1");
                throw ApiError(429, e.what());
            } catch (const ApiError&) {
                throw;
            } catch (const Error& e) {
                throw ApiError(400, e.what(), chat ? "messages" : "prompt");
            }
        } catch (const ApiError& e) {
            send_error(res, e.status(), e.what(), e.param());
            log_request(id, req, e.status(), nullptr, t0, {});
            return;
        }
        const std::string rid = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(id);
        const std::string model = cr.model.empty() ? opts.model_id : cr.model;
        const int64_t created = unix_time();
        if (!cr.stream) {
            std::unique_lock<std::mutex> lock(ch->mu);
            ch->cv.wait(lock, [&] { return ch->done; });
            const GenerateResult& g = ch->result;
            if (g.reason == StopReason::failed) {
                send_error(res, 500, g.error);
                log_request(id, req, 500, &g, t0, ch->first_piece);
                return;
            }
            json choice = {{"index", 0}, {"finish_reason", finish_reason(g.reason)}};
            if (chat) choice["message"] = {{"role", "assistant"}, {"content", g.text}};
            else choice["text"] = g.text;
            const json body = {{"id", rid},         {"object", chat ? "chat.completion" : "text_completion"},
                               {"created", created}, {"model", model},
                               {"choices", json::array({choice})}, {"usage", usage_json(g)}};
            res.set_content(dump(body), "application/json");
            log_request(id, req, 200, &g, t0, ch->first_piece);
            return;
        }
        // Server-Sent Events: a chunk per piece, the finish reason, usage
        // when asked for, then [DONE]. A failed write (the client left)
        // cancels the generation.
        auto chunk = [=](const json& delta_or_text, const json& finish) {
            json choice = {{"index", 0}, {"finish_reason", finish}};
            if (chat) choice["delta"] = delta_or_text;
            else choice["text"] = delta_or_text;
            return "data: " + dump(json{{"id", rid}, {"object", chat ? "chat.completion.chunk" : "text_completion"},
                                        {"created", created}, {"model", model}, {"choices", json::array({choice})}}) +
                   "\n\n";
        };
        res.set_header("Cache-Control", "no-cache");
        auto state = std::make_shared<int>(0);  // 0: nothing sent, 1: streaming, 2: finished
        res.set_chunked_content_provider(
            "text/event-stream",
            [this, ch, sid, chat, chunk, state, include_usage = cr.include_usage, id, req_copy = &req, t0,
             rid, created, model](size_t, httplib::DataSink& sink) {
                auto write = [&](const std::string& s) {
                    if (!sink.is_writable() || !sink.write(s.data(), s.size())) {
                        scheduler->cancel(sid);
                        return false;
                    }
                    return true;
                };
                if (*state == 0) {
                    *state = 1;
                    if (chat && !write(chunk(json{{"role", "assistant"}, {"content", ""}}, nullptr))) return false;
                }
                std::deque<std::string> got;
                bool done = false;
                {
                    std::unique_lock<std::mutex> lock(ch->mu);
                    ch->cv.wait_for(lock, std::chrono::seconds(15), [&] { return ch->done || !ch->pieces.empty(); });
                    got.swap(ch->pieces);
                    done = ch->done;
                }
                for (const std::string& p : got)
                    if (!write(chunk(chat ? json{{"content", p}} : json(p), nullptr))) return false;
                if (got.empty() && !done) return write(": keep-alive\n\n");
                if (!done) return true;
                const GenerateResult g = ch->result;
                if (g.reason == StopReason::failed) {
                    write("data: " + openai_error_body(500, g.error) + "\n\n");
                } else {
                    if (!write(chunk(chat ? json::object() : json(""), finish_reason(g.reason)))) return false;
                    if (include_usage)
                        write("data: " + dump(json{{"id", rid}, {"object", chat ? "chat.completion.chunk" : "text_completion"},
                                                   {"created", created}, {"model", model}, {"choices", json::array()},
                                                   {"usage", usage_json(g)}}) +
                              "\n\n");
                }
                write("data: [DONE]\n\n");
                log_request(id, *req_copy, 200, &g, t0, ch->first_piece);
                *state = 2;
                sink.done();
                return true;
            },
            [this, ch, sid, state, id, req_copy = &req, t0](bool) {
                // The response ended. When the client went away first, the
                // generation is cancelled; it ends at the scheduler's next
                // step, and the request is logged with its reason.
                if (*state == 2) return;
                scheduler->cancel(sid);
                std::unique_lock<std::mutex> lock(ch->mu);
                ch->cv.wait_for(lock, std::chrono::seconds(30), [&] { return ch->done; });
                if (ch->done) log_request(id, *req_copy, 499, &ch->result, t0, ch->first_piece);
            });
    }

    void run() {
        loop = std::thread([this] { scheduler->serve([this] { return stopping.load(); }); });
        if (!http.bind_to_port(opts.host.c_str(), opts.port)) {
            stopping = true;
            loop.join();
            throw Error("cannot listen on " + opts.host + ":" + std::to_string(opts.port) +
                        " (address in use, or not an address of this machine).");
        }
        log_info("ds4-server: listening on http://" + opts.host + ":" + std::to_string(opts.port) + " (" +
                 std::to_string(opts.parallel) + " slots of " + std::to_string(opts.n_ctx) + " tokens)");
        http.listen_after_bind();
        stopping = true;
        if (loop.joinable()) loop.join();
    }
};

Server::Server(Engine& engine, const ServerOptions& options) : impl_(std::make_unique<Impl>(engine, options)) {}

Server::~Server() {
    if (impl_->loop.joinable()) {
        stop();
        impl_->stopping = true;
        impl_->loop.join();
    }
}

void Server::run() { impl_->run(); }

void Server::stop() {
    // Requests in flight end as cancelled (their HTTP threads answer), then
    // the listener stops; run() stops the scheduler's loop last.
    impl_->scheduler->cancel_all();
    impl_->http.stop();
}

}  // namespace ds4

#include "server/server.h"

#include <httplib.h>
#include <openssl/err.h>
#include <sys/socket.h>

#include <cstdio>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "engine/engine.h"
#include "mapping/model_identity.h"
#include "server/api_error.h"
#include "server/api_key.h"
#include "server/cors.h"
#include "server/drain_gate.h"
#include "server/request_framing.h"
#include "server/server_context.h"

namespace ds4 {

namespace {

// The label /metrics counts a response under: a route the server serves,
// or "other" (unknown paths must not grow the label set without bound).
std::string endpoint_label(const std::string& path) {
    static const char* const kRoutes[] = {"/health", "/metrics", "/v1/models", "/v1/chat/completions",
                                          "/v1/completions", "/v1/responses", "/v1/messages",
                                          "/v1/messages/count_tokens"};
    for (const char* r : kRoutes)
        if (path == r) return path;
    return "other";
}

// HTTP, or HTTPS when the options name a certificate and key. httplib's
// SSLServer reads the files itself; one that is not PEM, or a key that does
// not match the certificate, leaves it invalid: one sentence with OpenSSL's
// reason, before anything is loaded.
std::unique_ptr<httplib::Server> make_listener(const ServerOptions& o) {
    if (o.ssl_cert_file.empty()) return std::make_unique<httplib::Server>();
    ERR_clear_error();
    auto s = std::make_unique<httplib::SSLServer>(o.ssl_cert_file.c_str(), o.ssl_key_file.c_str());
    if (s->is_valid()) return s;
    const unsigned long e = ERR_peek_last_error();
    const char* why = e ? ERR_reason_error_string(e) : nullptr;
    throw UsageError("--ssl-cert-file " + o.ssl_cert_file + " and --ssl-key-file " + o.ssl_key_file +
                     " are not a PEM certificate and its private key" + (why ? std::string(" (") + why + ")" : "") + ".");
}

// The pre-routing handler and the logger of one request run on the same
// worker thread, one request at a time: whether that request entered the
// drain gate (so the logger lets it out).
thread_local bool t_entered_gate = false;

std::string seconds_text(std::chrono::milliseconds t) {
    char s[32];
    std::snprintf(s, sizeof s, "%g s", double(t.count()) / 1000.0);
    return s;
}

}  // namespace

struct Server::Impl {
    ServerContext ctx;
    CorsPolicy cors;
    std::unique_ptr<httplib::Server> http;  // httplib::SSLServer with TLS
    DrainGate gate;               // requests routed and not yet answered in full
    std::thread listener;
    std::thread drainer;          // at stop(): waits for the gate, cancels at the timeout, stops the listener
    std::mutex mu;                // orders stop() against serve()'s start; guards the flags below
    bool stopping = false;        // stop() was called
    bool cancelled_rest = false;  // what was in flight was cancelled
    std::atomic<bool> listening_done{false};
    int listen_fd = -1;           // the listening socket, once bound

    explicit Impl(const ServerOptions& o) : ctx(o), cors(o.cors_origins), http(make_listener(o)) { routes(); }

    void send_error(const httplib::Request& req, httplib::Response& res, int status, const std::string& message) {
        res.status = status;
        res.set_content(error_body_for_path(req.path, status, message), "application/json");
    }

    bool authorized(const httplib::Request& req) const {
        if (ctx.opts.api_keys.empty() || req.path == "/health") return true;
        const std::string key = presented_api_key(req);
        for (const std::string& k : ctx.opts.api_keys)
            if (!key.empty() && key == k) return true;
        return false;
    }

    void routes() {
        const ServerOptions& opts = ctx.opts;
        // Enough workers for every slot's stream plus the queue's waiters.
        const size_t workers = static_cast<size_t>(opts.parallel) + std::min<size_t>(opts.max_queue, 64) + 4;
        httplib::Server& http = *this->http;
        http.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
        http.set_payload_max_length(opts.max_body_bytes);
        // httplib 0.11 listens with SO_REUSEPORT (a second server on the
        // same port would bind too and take half its connections) and a
        // backlog of 5 (a burst of clients overflows it: their SYNs are
        // dropped and retried a second later). SO_REUSEADDR only here; the
        // backlog is raised once bound (start()). SO_REUSEADDR alone still
        // lets a restarted server bind at once.
        http.set_socket_options([this](socket_t fd) {
            int yes = 1;
            ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
            listen_fd = fd;
        });
        http.set_read_timeout(10, 0);  // a client that stalls mid-request is dropped
        http.set_write_timeout(30, 0);
        http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
            if (!gate.enter()) {  // stopping: the listener still accepts until the drain ends
                if (req.path == "/health") {
                    res.status = 503;
                    res.set_content(R"({"status":"stopping"})", "application/json");
                } else {
                    send_error(req, res, 503, "the server is shutting down; retry when it is back or on another server.");
                }
                if (carries_body(req)) close_after(res);  // the body is not read
                return httplib::Server::HandlerResponse::Handled;
            }
            t_entered_gate = true;
            // Browsers send the preflight without the API key.
            if (cors.answer_preflight(req, res)) return httplib::Server::HandlerResponse::Handled;
            read_body_as_is(req);
            ignore_ranges(req);
            if (!authorized(req)) {
                send_error(req, res, 401, "a valid API key is required (Authorization: Bearer KEY or x-api-key: KEY).");
            } else if (const auto refusal = framing_refusal(req)) {
                send_error(req, res, refusal->status, refusal->message);
                if (refusal->status == 415) res.set_header("Accept-Encoding", "identity");
            } else {
                return httplib::Server::HandlerResponse::Unhandled;
            }
            if (carries_body(req)) close_after(res);  // the body is not read
            return httplib::Server::HandlerResponse::Handled;
        });
        // Statuses httplib sets itself (404, 413, 400 for a malformed
        // request line) get the same JSON error shapes.
        http.set_error_handler([this, &opts](const httplib::Request& req, httplib::Response& res) {
            ignore_ranges(req);  // a 416's half-parsed ranges would slice this answer too
            if (!res.body.empty() || res.content_length_ > 0) return;  // answered already (close_after)
            const std::string m = res.status == 404   ? "no endpoint " + req.method + " " + req.path + "."
                                  : res.status == 413 ? "the request body exceeds " + std::to_string(opts.max_body_bytes) + " bytes."
                                  : res.status == 405 ? "method not allowed."
                                  : res.status == 416 ? "the Range header is malformed; this server answers whole responses, so send none."
                                                      : "the request could not be read.";
            send_error(req, res, res.status, m);
            if (res.status == 416 && carries_body(req)) close_after(res);  // refused before the body was read
        });
        // Every response, just before its headers are written.
        http.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
            cors.apply(req, res);  // errors too: a page can read why it was refused
            // Stopping: no request after this one on the connection.
            if (gate.closed() && res.get_header_value("Connection") != "close") res.set_header("Connection", "close");
            // httplib adds Keep-Alive to an answer a handler already marked
            // to close the connection (an HTTP/1.0 stream, a refusal).
            if (res.get_header_value("Connection") == "close") res.headers.erase("Keep-Alive");
        });
        // Every response written, once, with the status sent.
        http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
            ctx.metrics.count_request(endpoint_label(req.path), res.status);
            if (t_entered_gate) {
                t_entered_gate = false;
                gate.leave();
            }
        });
        http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
            if (!ctx.engine.load(std::memory_order_acquire)) {
                res.status = 503;
                res.set_header("Retry-After", "1");
                res.set_content(R"({"status":"loading"})", "application/json");
                return;
            }
            res.set_content(R"({"status":"ok"})", "application/json");
        });
        http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
            std::optional<SchedulerStats> s;
            if (ctx.engine.load(std::memory_order_acquire)) s = ctx.scheduler->stats();
            std::string text = ctx.metrics.render(s);
            if (ctx.opts.extra_metrics) text += ctx.opts.extra_metrics();
            res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
        });
        add_openai_routes(http, ctx);
        add_anthropic_routes(http, ctx);
        add_responses_routes(http, ctx);
    }

    void start() {
        if (!http->bind_to_port(ctx.opts.host.c_str(), ctx.opts.port))
            throw Error("cannot listen on " + ctx.opts.host + ":" + std::to_string(ctx.opts.port) +
                        " (address in use, or not an address of this machine).");
        ::listen(listen_fd, SOMAXCONN);
        // No line yet: a model that fails to load is one sentence alone.
        listener = std::thread([this] {
            // Returns after stop() once every connection's handler has
            // returned: each response in flight was written whole.
            http->listen_after_bind();
            listening_done = true;
        });
    }

    void serve(const Engine& engine) {
        {
            std::lock_guard<std::mutex> lock(mu);
            if (stopping) return;
            SchedulerOptions so;
            so.n_slots = ctx.opts.parallel;
            so.n_ctx = ctx.opts.n_ctx;
            so.prefill_chunk = ctx.opts.prefill_chunk;
            so.batch_tokens = ctx.opts.batch_tokens;
            so.max_queue = ctx.opts.max_queue;
            so.prefix_cache_bytes = ctx.opts.cache_ram_bytes;
            if (!ctx.opts.kv_disk_dir.empty()) {
                SnapshotDiskOptions disk;
                disk.dir = ctx.opts.kv_disk_dir;
                disk.max_bytes = ctx.opts.kv_disk_bytes;
                disk.model_identity = model_identity(engine.file());
                disk.codec = parse_snapshot_codec(ctx.opts.kv_disk_compression);
                so.disk_cache = disk;
            }
            ctx.scheduler = engine.new_scheduler(so);
            if (const auto disk = ctx.scheduler->stats().disk)
                log_info("ds4-server: KV cache on disk in " + ctx.opts.kv_disk_dir + ": " + std::to_string(disk->files) +
                         " snapshots, " + std::to_string(disk->bytes >> 20) + " of " +
                         std::to_string(ctx.opts.kv_disk_bytes >> 20) + " MiB (" + ctx.opts.kv_disk_compression + ")");
            // Logged before /health can say ok, so the line is there for
            // whoever saw the 200.
            log_info(std::string("ds4-server: listening on ") + (ctx.opts.ssl_cert_file.empty() ? "http" : "https") +
                     "://" + ctx.opts.host + ":" + std::to_string(ctx.opts.port) + " (" +
                     std::to_string(ctx.opts.parallel) + " slots of " + std::to_string(ctx.opts.n_ctx) +
                     " tokens; GET /health answered 503 while the model loaded)");
            ctx.engine.store(&engine, std::memory_order_release);
        }
        // The scheduler runs until the listener has stopped: handlers still
        // in flight at stop() wait for their generations to end (finished,
        // or cancelled at the shutdown timeout).
        ctx.scheduler->serve([this] { return listening_done.load(); });
    }

    void stop(bool now) {
        std::lock_guard<std::mutex> lock(mu);
        if (!stopping) {
            stopping = true;
            gate.close();
            if (!ctx.scheduler) {  // still loading: nothing generates, nothing to wait for
                http->stop();
                return;
            }
            if (!now && ctx.opts.shutdown_timeout.count() > 0)
                log_info("ds4-server: stopping: " + std::to_string(in_flight()) + " requests in flight get up to " +
                         seconds_text(ctx.opts.shutdown_timeout) + " to finish");
            drainer = std::thread([this] { drain(); });
        }
        if (now || ctx.opts.shutdown_timeout.count() == 0) cancel_rest();
    }

    int in_flight() const {
        const SchedulerStats s = ctx.scheduler->stats();
        return s.active + static_cast<int>(s.queued);
    }

    // The drainer: the requests routed before stop() finish, or are
    // cancelled at the timeout and answer as their API ends a cancelled
    // generation; then the listener stops.
    void drain() {
        using Clock = std::chrono::steady_clock;
        if (!gate.wait_idle_until(Clock::now() + ctx.opts.shutdown_timeout)) {
            {
                std::lock_guard<std::mutex> lock(mu);
                cancel_rest();
            }
            // A cancelled generation ends at the scheduler's next step; a
            // client that stopped reading holds its answer up to the write
            // timeout (30 s).
            if (!gate.wait_idle_until(Clock::now() + std::chrono::seconds(40)))
                log_warning("ds4-server: " + std::to_string(gate.in_flight()) +
                            " responses still unwritten after the cancel; stopping without them");
        }
        http->stop();
    }

    // With mu held. Generations end as cancelled at the scheduler's next
    // step; those submitted after this by requests routed before stop()
    // are cancelled at once (ServerContext::submit).
    void cancel_rest() {
        if (cancelled_rest) return;
        cancelled_rest = true;
        ctx.cancelling = true;
        if (const int n = in_flight(); n > 0)
            log_info("ds4-server: cancelling " + std::to_string(n) + " requests still in flight");
        ctx.scheduler->cancel_all();
    }

    // After the listener stopped: the disk KV cache's queued writes reach
    // the disk before the program says it stopped.
    void finish() {
        if (drainer.joinable()) drainer.join();
        if (!ctx.scheduler) return;
        const PrefixCache* cache = ctx.scheduler->prefix_cache();
        if (!cache || !cache->disk()) return;
        cache->disk()->flush();
        const SnapshotDiskStats d = cache->disk()->stats();
        log_info("ds4-server: KV cache on disk in " + ctx.opts.kv_disk_dir + " flushed: " + std::to_string(d.files) +
                 " snapshots, " + std::to_string(d.bytes >> 20) + " MiB");
    }


    // After stop(): waits for the listener's thread. httplib's stop() does
    // nothing until listen_after_bind() is running, so a stop() that came
    // between bind and listen (a signal at start) is repeated.
    void join_listener() {
        if (!listener.joinable()) return;
        while (!listening_done) {
            http->stop();
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        listener.join();
    }
};

Server::Server(const ServerOptions& options) : impl_(std::make_unique<Impl>(options)) {}

Server::~Server() {
    stop();
    impl_->join_listener();
    if (impl_->drainer.joinable()) impl_->drainer.join();
}

void Server::start() { impl_->start(); }

void Server::serve(const Engine& engine) {
    impl_->serve(engine);
    impl_->join_listener();
    impl_->finish();
}

void Server::stop() { impl_->stop(false); }

void Server::stop_now() { impl_->stop(true); }

}  // namespace ds4

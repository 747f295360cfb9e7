#include "server/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <mutex>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "engine/engine.h"
#include "mapping/model_identity.h"
#include "server/api_error.h"
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

}  // namespace

struct Server::Impl {
    ServerContext ctx;
    httplib::Server http;
    std::thread listener;
    std::mutex mu;                // orders stop() against serve()'s start
    bool stopping = false;        // stop() was called
    std::atomic<bool> listening_done{false};
    int listen_fd = -1;           // the listening socket, once bound

    explicit Impl(const ServerOptions& o) : ctx(o) { routes(); }

    void send_error(const httplib::Request& req, httplib::Response& res, int status, const std::string& message) {
        res.status = status;
        res.set_content(error_body_for_path(req.path, status, message), "application/json");
    }

    bool authorized(const httplib::Request& req) const {
        if (ctx.opts.api_keys.empty() || req.path == "/health") return true;
        std::string key;
        const std::string auth = req.get_header_value("Authorization");
        if (auth.rfind("Bearer ", 0) == 0) key = auth.substr(7);
        else key = req.get_header_value("x-api-key");
        for (const std::string& k : ctx.opts.api_keys)
            if (!key.empty() && key == k) return true;
        return false;
    }

    void routes() {
        const ServerOptions& opts = ctx.opts;
        // Enough workers for every slot's stream plus the queue's waiters.
        const size_t workers = static_cast<size_t>(opts.parallel) + std::min<size_t>(opts.max_queue, 64) + 4;
        http.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
        http.set_payload_max_length(opts.max_body_bytes);
        // httplib 0.11 listens with SO_REUSEPORT (a second server on the
        // same port would bind too and take half its connections) and a
        // backlog of 5 (a burst of clients overflows it: their SYNs are
        // dropped and retried a second later). SO_REUSEADDR only here; the
        // backlog is raised once bound (start()).
        http.set_socket_options([this](socket_t fd) {
            int yes = 1;
            ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
            listen_fd = fd;
        });
        http.set_read_timeout(10, 0);  // a client that stalls mid-request is dropped
        http.set_write_timeout(30, 0);
        http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
            read_body_as_is(req);
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
            if (!res.body.empty() || res.content_length_ > 0) return;  // answered already (close_after)
            const std::string m = res.status == 404   ? "no endpoint " + req.method + " " + req.path + "."
                                  : res.status == 413 ? "the request body exceeds " + std::to_string(opts.max_body_bytes) + " bytes."
                                  : res.status == 405 ? "method not allowed."
                                                      : "the request could not be read.";
            send_error(req, res, res.status, m);
        });
        // Every response written, once, with the status sent.
        http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
            ctx.metrics.count_request(endpoint_label(req.path), res.status);
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
        if (!http.bind_to_port(ctx.opts.host.c_str(), ctx.opts.port))
            throw Error("cannot listen on " + ctx.opts.host + ":" + std::to_string(ctx.opts.port) +
                        " (address in use, or not an address of this machine).");
        ::listen(listen_fd, SOMAXCONN);
        // No line yet: a model that fails to load is one sentence alone.
        listener = std::thread([this] {
            http.listen_after_bind();
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
            log_info("ds4-server: listening on http://" + ctx.opts.host + ":" + std::to_string(ctx.opts.port) + " (" +
                     std::to_string(ctx.opts.parallel) + " slots of " + std::to_string(ctx.opts.n_ctx) +
                     " tokens; GET /health answered 503 while the model loaded)");
            ctx.engine.store(&engine, std::memory_order_release);
        }
        // The scheduler runs until the listener has stopped: handlers still
        // in flight at stop() wait for their cancelled generations to end.
        ctx.scheduler->serve([this] { return listening_done.load(); });
    }

    void stop() {
        std::lock_guard<std::mutex> lock(mu);
        stopping = true;
        // Requests in flight end as cancelled (their HTTP threads answer),
        // then the listener stops; serve() stops the scheduler's loop last.
        if (ctx.scheduler) ctx.scheduler->cancel_all();
        http.stop();
    }


    // After stop(): waits for the listener's thread. httplib's stop() does
    // nothing until listen_after_bind() is running, so a stop() that came
    // between bind and listen (a signal at start) is repeated.
    void join_listener() {
        if (!listener.joinable()) return;
        while (!listening_done) {
            http.stop();
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        listener.join();
    }
};

Server::Server(const ServerOptions& options) : impl_(std::make_unique<Impl>(options)) {}

Server::~Server() {
    stop();
    impl_->join_listener();
}

void Server::start() { impl_->start(); }

void Server::serve(const Engine& engine) {
    impl_->serve(engine);
    impl_->join_listener();
}

void Server::stop() { impl_->stop(); }

}  // namespace ds4

// ds4-server: the OpenAI- and Anthropic-compatible server (src/server) over one engine.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include "cli/server_options.h"
#include "common/error.h"
#include "engine/engine.h"
#include "pipeline/coordinator.h"
#include "pipeline/hop_stats.h"
#include "server/expert_metrics.h"
#include "pipeline/pipeline_setup.h"
#include "server/server.h"

namespace {

// SIGINT/SIGTERM only count; a watcher thread stops the server: the first
// lets requests in flight finish (--shutdown-timeout), a second cancels them.
volatile std::sig_atomic_t g_signals = 0;
void on_signal(int) { g_signals = g_signals + 1; }

}  // namespace

int main(int argc, char** argv) {
    ds4::ServerCliOptions o;
    try {
        o = ds4::parse_server_options(argc, argv);
    } catch (const ds4::UsageError& e) {
        std::fprintf(stderr, "ds4-server: %s\n", e.what());
        return 2;
    }
    if (o.help) {
        std::fputs(ds4::server_help_text().c_str(), stdout);
        return 0;
    }
    if (o.version) {
        std::printf("ds4-server %s\n", DS4_VERSION);
        return 0;
    }
    // The cluster key and TLS files are part of the command line: a bad one is exit 2, before any load.
    ds4::PipelineSecrets secrets;
    try {
        secrets = ds4::load_pipeline_secrets(o);
    } catch (const ds4::Error& e) {
        std::fprintf(stderr, "ds4-server: %s\n", e.what());
        return 2;
    }
    try {
        struct sigaction sa {};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, nullptr);
        sigaction(SIGTERM, &sa, nullptr);
        std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up is a failed write, not a dead server

        ds4::ServerOptions so;
        so.host = o.host;
        so.port = o.port;
        so.api_keys = o.api_keys;
        so.max_body_bytes = o.max_body_mb << 20;
        so.parallel = o.parallel;
        so.n_ctx = o.ctx;
        so.prefill_chunk = o.dist_prefill_chunk > 0 ? o.dist_prefill_chunk : o.prefill_chunk;
        so.batch_tokens = o.batch_size;
        so.max_queue = static_cast<size_t>(o.max_queue);
        so.cache_ram_bytes = o.cache_ram_mb << 20;
        so.kv_disk_dir = o.kv_disk_dir;
        so.kv_disk_bytes = o.kv_disk_space_mb << 20;
        so.kv_disk_compression = o.kv_disk_compression;
        so.model_id = o.alias.empty() ? std::filesystem::path(o.model).filename().string() : o.alias;
        so.shutdown_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.shutdown_timeout * 1000.0 + 0.5));
        so.cors_origins = o.cors_origins;
        so.ssl_cert_file = o.ssl_cert_file;
        so.ssl_key_file = o.ssl_key_file;
        // A coordinator's per-hop telemetry in /metrics (made before the
        // server, so it outlives every scrape).
        std::shared_ptr<ds4::HopStats> hop_stats;
        if (o.role == "coordinator") hop_stats = std::make_shared<ds4::HopStats>();
        // The expert cache's counters (--ssd-streaming), once the engine is open.
        auto live_engine = std::make_shared<std::atomic<const ds4::Engine*>>(nullptr);
        if (hop_stats || o.ssd.enabled)
            so.extra_metrics = [hop_stats, live_engine, ssd = o.ssd.enabled] {
                std::string text = hop_stats ? hop_stats->prometheus() : std::string();
                if (const ds4::Engine* e = live_engine->load(); ssd && e)
                    text += ds4::expert_cache_prometheus(e->expert_stats());
                return text;
            };

        // The engine outlives the server (its scheduler holds the model),
        // and the coordinator the engine's route.
        std::unique_ptr<ds4::Coordinator> coordinator;
        std::unique_ptr<ds4::Engine> engine;
        std::unique_ptr<ds4::Server> made;
        try {
            made = std::make_unique<ds4::Server>(so);
        } catch (const ds4::UsageError& e) {  // the TLS files: a bad command line, before any load
            std::fprintf(stderr, "ds4-server: %s\n", e.what());
            return 2;
        }
        ds4::Server& server = *made;
        // Listening first: GET /health answers 503 while the model loads.
        server.start();
        std::atomic<bool> leaving{false};  // this scope is ending: the watcher stops too
        std::thread watcher([&] {
            auto wait_for_signal = [&](int n) {
                while (g_signals < n && !leaving) std::this_thread::sleep_for(std::chrono::milliseconds(50));
                return g_signals >= n;
            };
            wait_for_signal(1);
            server.stop();
            if (wait_for_signal(2)) server.stop_now();
        });
        struct StopWatcher {  // on every way out of this scope
            std::thread& t;
            std::atomic<bool>& leaving;
            ~StopWatcher() {
                leaving = true;
                t.join();
            }
        } stop_watcher{watcher, leaving};

        ds4::EngineOptions e;
        e.model = o.model;
        e.backend.name = o.backend;
        e.backend.threads = o.threads;
        e.backend.int8_activations = o.int8_activations;
        e.backend.exact = o.exact;
        e.check_tensors = o.check_tensors;
        e.chat_template = o.chat_template;
        e.ssd_streaming = o.ssd;
        if (o.layers) e.layers = *o.layers;
        // Test hook: the load takes at least this long, so a test can watch
        // /health answer 503 whatever the machine's speed.
        if (const char* d = std::getenv("DS4_TEST_LOAD_DELAY_MS"))
            std::this_thread::sleep_for(std::chrono::milliseconds(std::strtol(d, nullptr, 10)));
        engine = ds4::Engine::open(e);
        engine->tokenizer();  // a file without a vocabulary fails here, before serving
        live_engine->store(engine.get());
        if (o.role == "coordinator") {
            // Still loading for /health until every later block has a worker.
            ds4::CoordinatorConfig cc = ds4::coordinator_config(o, std::move(secrets), o.parallel, o.ctx);
            cc.hop_stats = hop_stats;
            coordinator = std::make_unique<ds4::Coordinator>(*engine, std::move(cc));
            coordinator->wait_for_route();
            engine->set_route(coordinator->route());
        }
        server.serve(*engine);
        std::fprintf(stderr, "ds4-server: stopped\n");
        return 0;
    } catch (const ds4::Error& e) {
        std::fprintf(stderr, "ds4-server: %s\n", e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "ds4-server: out of memory.\n");
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ds4-server: internal error: %s\n", e.what());
        return 1;
    }
}

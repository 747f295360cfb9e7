// A pipeline route in one process over real gRPC on loopback: a coordinator
// engine (blocks 0..k) and worker engines serving the rest, each its own
// model map. The route's logits equal the whole model's bit for bit (with
// a random window of prefill chunks in flight); a
// worker that restarts between two evaluations of a session (its state
// gone) is caught by the position/prefix-hash check and the sequence is
// replayed, so the next logits are still exact; a worker that stops fails
// the step with a sentence naming it, within seconds, and the session's
// position does not move. Every family, a fresh random model each run.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "engine/engine.h"
#include "pipeline/coordinator.h"
#include "pipeline/worker.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

namespace fs = std::filesystem;

fs::path program(const std::string& name) {
    const char* dir = std::getenv("DS4_BIN");
    return fs::path(dir && *dir ? dir : DS4_BINARY_DIR) / name;
}

std::unique_ptr<Engine> open(const fs::path& file, LayerRange layers) {
    EngineOptions o;
    o.model = file.string();
    o.backend.name = "cpu";
    o.backend.threads = 1;
    o.layers = layers;
    o.chat = false;
    return Engine::open(o);
}

// A worker serving in a thread until stopped.
struct WorkerThread {
    std::unique_ptr<Engine> engine;
    std::atomic<bool> stop{false};
    std::thread thread;
    std::string error;
    WorkerThread(const fs::path& file, LayerRange layers, int coordinator_port) : engine(open(file, layers)) {
        WorkerConfig w;
        w.coordinator_host = "127.0.0.1";
        w.coordinator_port = coordinator_port;
        w.max_ctx = 1024;
        thread = std::thread([this, w] {
            try {
                run_worker(*engine, w, stop);
            } catch (const Error& e) {
                error = e.what();
            }
        });
    }
    ~WorkerThread() {
        stop = true;
        thread.join();
    }
};

class RouteReplay : public ::testing::TestWithParam<const char*> {};

TEST_P(RouteReplay, ExactThroughRestartsAndFailsCleanlyWhenAWorkerStops) {
    const std::string arch = GetParam();
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    const fs::path dir = fs::temp_directory_path() / ("ds4-route-" + std::to_string(::getpid()) + "-" + arch);
    fs::create_directories(dir);
    const fs::path file = dir / "m.gguf";
    const std::string cmd = program("ds4-gguf").string() + " synth --arch " + arch +
                            " --preset tiny --no-tokenizer --seed " + std::to_string(seed % 1000000) + " --out " +
                            file.string() + " > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const LogSink quiet = set_log_sink([](LogLevel l, std::string_view s) {
        if (l >= LogLevel::warning) std::fprintf(stderr, "%.*s\n", int(s.size()), s.data());
    });

    std::mt19937 rng(static_cast<uint32_t>(seed));
    auto whole = open(file, LayerRange::all());
    const int n_layer = whole->info().n_layer;
    ASSERT_GE(n_layer, 3);
    const int64_t V = whole->info().n_vocab;
    std::vector<int32_t> tokens(90 + rng() % 60);
    for (auto& t : tokens) t = static_cast<int32_t>(rng() % std::min<int64_t>(V, 5000));
    const size_t cut = 20 + rng() % 40;
    const std::span<const int32_t> first(tokens.data(), cut), second(tokens.data() + cut, tokens.size() - cut);

    SessionOptions so;
    so.n_ctx = 1024;
    so.prefill_chunk = 1 + rng() % 40;
    so.prefill_window = 1 + static_cast<int>(rng() % 8);  // chunks in flight along the route (the whole model: unused)
    auto ref_session = whole->new_session(so);
    const std::vector<float> ref1 = ref_session->eval(first, true);
    const std::vector<float> ref2 = ref_session->eval(second, true);

    // Coordinator: block 0 (and maybe 1); two workers split the rest.
    int k = 1 + static_cast<int>(rng() % (n_layer - 2));  // coordinator runs blocks 0..k-1
    int m = k + 1 + static_cast<int>(rng() % (n_layer - k - 1));
    if (arch == "glm-dsa") {
        // A stage starts at a block with its own indexer: the tiny preset's
        // block 2 reuses block 1's selection, so the splits are 1 and 3.
        k = 1;
        m = 3;
    }
    auto coord_engine = open(file, LayerRange{0, k});
    CoordinatorConfig cc;
    cc.n_ctx = so.n_ctx;
    cc.wait_for_workers = std::chrono::seconds(60);
    Coordinator coordinator(*coord_engine, cc);
    auto w1 = std::make_unique<WorkerThread>(file, LayerRange{k, m}, coordinator.port());
    auto w2 = std::make_unique<WorkerThread>(file, LayerRange{m, LayerRange::kThroughLast}, coordinator.port());
    coordinator.wait_for_route();
    coord_engine->set_route(coordinator.route());
    auto session = coord_engine->new_session(so);
    SCOPED_TRACE("blocks 0.." + std::to_string(k - 1) + " | " + std::to_string(k) + ".." + std::to_string(m - 1) +
                 " | " + std::to_string(m) + "..output, chunk " + std::to_string(so.prefill_chunk) + ", window " +
                 std::to_string(so.prefill_window));
    EXPECT_EQ(session->eval(first, true), ref1);

    // The last worker restarts: a new process state, a new port.
    const std::string old_address = coordinator.table().hops().back().address();
    w2.reset();
    w2 = std::make_unique<WorkerThread>(file, LayerRange{m, LayerRange::kThroughLast}, coordinator.port());
    for (int i = 0; i < 400; ++i) {
        if (coordinator.table().problem().empty() && coordinator.table().hops().back().address() != old_address) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_NE(coordinator.table().hops().back().address(), old_address) << "the restarted worker never registered";
    EXPECT_EQ(session->eval(second, true), ref2) << "after a worker restart";
    EXPECT_EQ(session->n_past(), static_cast<int64_t>(tokens.size()));

    // The middle worker stops for good: the step fails naming it, quickly,
    // and the session stays where it was.
    w1.reset();
    const auto t0 = std::chrono::steady_clock::now();
    const int32_t next = tokens[0];
    try {
        session->eval(std::span<const int32_t>(&next, 1), false);
        ADD_FAILURE() << "a step through a stopped worker succeeded";
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_TRUE(what.find("did not answer") != std::string::npos || what.find("incomplete") != std::string::npos)
            << what;
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
    EXPECT_EQ(session->n_past(), static_cast<int64_t>(tokens.size()));
    EXPECT_EQ(w2->error, "");
    set_log_sink(quiet);
    fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Families, RouteReplay, ::testing::Values("qwen3moe", "deepseek4", "glm-dsa"));

}  // namespace
}  // namespace ds4

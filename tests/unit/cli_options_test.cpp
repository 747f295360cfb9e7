// Command-line rules of `ds4`: every accepted form, and for every rejected
// one that the UsageError is one line naming the flag. Numbers in the range
// tests are drawn fresh each run (seed printed on failure).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "chat/chat.h"
#include "cli/ds4_options.h"
#include "common/error.h"
#include "common/host_memory.h"
#include "support/temp_file.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

using test::TempFile;

class Ds4OptionsTest : public ::testing::Test {
protected:
    TempFile model_;
    TempFile text_{"hello"};
    TempFile ids_{"1 2 3"};

    // Parses `args`; adds "-m <existing file>" unless the test names a model.
    Ds4Options parse(std::vector<std::string> args, bool add_model = true) {
        std::vector<std::string> all = {"ds4"};
        if (add_model) {
            all.push_back("-m");
            all.push_back(model_.path());
        }
        all.insert(all.end(), args.begin(), args.end());
        std::vector<const char*> argv;
        for (auto& a : all) argv.push_back(a.c_str());
        argv.push_back(nullptr);
        return parse_ds4_options(static_cast<int>(all.size()), argv.data());
    }

    // Expects a UsageError whose single-line message contains every needle.
    void expect_usage(std::vector<std::string> args, std::vector<std::string> needles, bool add_model = true) {
        std::string joined;
        for (auto& a : args) joined += a + " ";
        SCOPED_TRACE("args: " + joined);
        try {
            parse(args, add_model);
            ADD_FAILURE() << "no UsageError";
        } catch (const UsageError& e) {
            std::string msg = e.what();
            EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
            EXPECT_FALSE(msg.empty());
            for (auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "message: " << msg << "\nwanted: " << n;
        } catch (const std::exception& e) {
            ADD_FAILURE() << "wrong exception type: " << e.what();
        }
    }
};

TEST_F(Ds4OptionsTest, Defaults) {
    Ds4Options o = parse({});
    EXPECT_EQ(o.model, model_.path());
    EXPECT_EQ(o.backend, "auto");
    EXPECT_GE(o.threads, 1);
    EXPECT_EQ(o.prefill_chunk, 4096);
    EXPECT_TRUE(o.think);
    EXPECT_FALSE(o.seed.has_value());
    EXPECT_FALSE(o.has_prompt);
    EXPECT_FALSE(o.layers.has_value());
    EXPECT_FALSE(o.ssd.enabled);
    EXPECT_FALSE(o.check_tensors);
    EXPECT_FALSE(o.help);
    EXPECT_FALSE(o.version);
    EXPECT_EQ(Ds4Options{}.model, "./ds4flash.gguf");
}

TEST_F(Ds4OptionsTest, EveryFlagAccepted) {
    Ds4Options o = parse({"-p", "hi there", "-n", "17", "-c", "2048", "-t", "3", "--prefill-chunk", "256",
                          "--temp", "0", "--top-p", "1", "--top-k", "0", "--min-p", "0.05", "--seed", "18446744073709551615",
                          "--nothink", "-sys", "be brief", "--backend", "cuda", "--layers", "0:11", "--role",
                          "coordinator", "--listen", "127.0.0.1", "9000", "--ssd-streaming",
                          "--ssd-streaming-cache-experts", "64", "--check-tensors", "--dist-activation-bits", "8",
                          "--dist-prefill-chunk", "128", "--dist-prefill-window", "7", "--debug"});
    EXPECT_TRUE(o.has_prompt);
    EXPECT_EQ(o.prompt, "hi there");
    EXPECT_EQ(o.n_predict, 17);
    EXPECT_EQ(o.ctx, 2048);
    EXPECT_EQ(o.threads, 3);
    EXPECT_EQ(o.prefill_chunk, 256);
    EXPECT_EQ(o.dist_prefill_window, 7);
    EXPECT_EQ(o.temp, 0.0f);
    EXPECT_EQ(o.top_p, 1.0f);
    EXPECT_EQ(o.top_k, 0);
    EXPECT_FLOAT_EQ(o.min_p, 0.05f);
    ASSERT_TRUE(o.seed.has_value());
    EXPECT_EQ(*o.seed, UINT64_MAX);
    EXPECT_FALSE(o.think);
    EXPECT_EQ(o.system, "be brief");
    EXPECT_EQ(o.backend, "cuda");
    ASSERT_TRUE(o.layers.has_value());
    EXPECT_EQ(o.layers->begin, 0);
    EXPECT_EQ(o.layers->end, 12);
    EXPECT_EQ(o.role, "coordinator");
    EXPECT_EQ(o.listen_host, "127.0.0.1");
    EXPECT_EQ(o.listen_port, 9000);
    EXPECT_EQ(o.activation_bits, 8);
    EXPECT_EQ(o.dist_prefill_chunk, 128);
    EXPECT_TRUE(o.debug);
    EXPECT_TRUE(o.ssd.enabled);
    EXPECT_TRUE(o.check_tensors);
    EXPECT_EQ(o.ssd.experts, 64u);
    EXPECT_EQ(o.ssd.bytes, 0u);
}

TEST_F(Ds4OptionsTest, LongFormsAndAliases) {
    Ds4Options o = parse({"--prompt", "x", "--tokens", "5", "--ctx", "9", "--threads", "2", "--system", "s", "--think"});
    EXPECT_EQ(o.n_predict, 5);
    EXPECT_EQ(o.ctx, 9);
    EXPECT_EQ(o.threads, 2);
    EXPECT_EQ(o.system, "s");
    EXPECT_TRUE(o.think);
    EXPECT_EQ(parse({"--n-predict", "-1"}).n_predict, -1);
    EXPECT_EQ(parse({"--model=" + model_.path(), "--temp=1.5"}, false).temp, 1.5f);
    EXPECT_EQ(parse({"-sys=abc"}).system, "abc");
    EXPECT_EQ(parse({"-p", ""}).has_prompt, true);
    EXPECT_EQ(parse({"--prompt-file", text_.path()}).prompt_file, text_.path());
}

TEST_F(Ds4OptionsTest, WorkerAndLogitsDump) {
    Ds4Options w = parse({"--role", "worker", "--listen", "127.0.0.2", "65535", "--layers", "12:output",
                          "--coordinator", "localhost", "9000"});
    EXPECT_EQ(w.listen_host, "127.0.0.2");
    EXPECT_EQ(w.listen_port, 65535);
    EXPECT_EQ(w.coordinator_host, "localhost");
    EXPECT_EQ(w.coordinator_port, 9000);
    EXPECT_EQ(w.layers->end, LayerRange::kThroughLast);
    EXPECT_EQ(w.layers->begin, 12);
    // On loopback a worker may leave --listen out (a free port is picked).
    EXPECT_EQ(parse({"--role", "worker", "--layers", "3:5", "--coordinator", "127.0.0.1", "9"}).listen_port, 0);

    Ds4Options d = parse({"--token-ids", ids_.path(), "--dump-logits", "/tmp/ds4_logits_out.bin"});
    EXPECT_EQ(d.token_ids_file, ids_.path());
    EXPECT_EQ(d.dump_logits_file, "/tmp/ds4_logits_out.bin");
}

TEST_F(Ds4OptionsTest, ExpertCacheInGiB) {
    Ds4Options o = parse({"--ssd-streaming", "--ssd-streaming-cache-experts", "12GB"});
    EXPECT_EQ(o.ssd.experts, 0u);
    EXPECT_EQ(o.ssd.bytes, 12ull << 30);
    EXPECT_EQ(parse({"--ssd-streaming", "--ssd-streaming-cache-experts", "1.5gib"}).ssd.bytes, 3ull << 29);
    EXPECT_EQ(parse({"--ssd-streaming", "--ssd-streaming-cache-experts", "2G"}).ssd.bytes, 2ull << 30);
}

TEST_F(Ds4OptionsTest, SsdStreamingStrategyReadsAndProfile) {
    const Ds4Options d = parse({"--ssd-streaming"});
    EXPECT_EQ(d.ssd.prefill, PrefillStrategy::automatic);
    EXPECT_EQ(d.ssd.io, ReadMethod::automatic);
    EXPECT_TRUE(d.ssd.profile.empty());
    EXPECT_FALSE(d.ssd.preload.has_value());
    const Ds4Options o = parse({"--ssd-streaming", "--ssd-streaming-prefill", "full-layer", "--ssd-streaming-io", "pread",
                                "--ssd-streaming-profile", "/tmp/ds4-profile.txt", "--ssd-streaming-preload-experts", "40"});
    EXPECT_EQ(o.ssd.prefill, PrefillStrategy::full_layer);
    EXPECT_EQ(o.ssd.io, ReadMethod::pread);
    EXPECT_EQ(o.ssd.profile, "/tmp/ds4-profile.txt");
    EXPECT_EQ(o.ssd.preload.value_or(-1), 40);
    EXPECT_EQ(parse({"--ssd-streaming", "--ssd-streaming-prefill", "per-expert"}).ssd.prefill, PrefillStrategy::per_expert);
    EXPECT_EQ(parse({"--ssd-streaming", "--ssd-streaming-io", "io_uring"}).ssd.io, ReadMethod::uring);
    expect_usage({"--ssd-streaming", "--ssd-streaming-prefill", "layer"}, {"--ssd-streaming-prefill", "'layer'"});
    expect_usage({"--ssd-streaming", "--ssd-streaming-io", "aio"}, {"--ssd-streaming-io", "'aio'"});
    expect_usage({"--ssd-streaming-io", "pread"}, {"--ssd-streaming-io", "needs --ssd-streaming"});
    EXPECT_TRUE(d.ssd.overlap);
    EXPECT_FALSE(parse({"--ssd-streaming", "--ssd-streaming-overlap", "off"}).ssd.overlap);
    EXPECT_TRUE(parse({"--ssd-streaming", "--ssd-streaming-overlap", "on"}).ssd.overlap);
    expect_usage({"--ssd-streaming", "--ssd-streaming-overlap", "yes"}, {"--ssd-streaming-overlap", "'yes'"});
    expect_usage({"--ssd-streaming-overlap", "off"}, {"--ssd-streaming-overlap", "needs --ssd-streaming"});
    EXPECT_FALSE(d.ssd.lookahead);
    EXPECT_TRUE(parse({"--ssd-streaming", "--ssd-streaming-lookahead", "on"}).ssd.lookahead);
    EXPECT_FALSE(parse({"--ssd-streaming", "--ssd-streaming-lookahead", "off"}).ssd.lookahead);
    expect_usage({"--ssd-streaming", "--ssd-streaming-lookahead", "2"}, {"--ssd-streaming-lookahead", "'2'"});
    EXPECT_EQ(d.ssd.windows, ExpertWindowsMode::automatic);
    EXPECT_EQ(parse({"--ssd-streaming", "--ssd-streaming-windows", "on"}).ssd.windows, ExpertWindowsMode::on);
    EXPECT_EQ(parse({"--ssd-streaming", "--ssd-streaming-windows", "off"}).ssd.windows, ExpertWindowsMode::off);
    EXPECT_EQ(parse({"--ssd-streaming", "--ssd-streaming-windows", "auto"}).ssd.windows, ExpertWindowsMode::automatic);
    expect_usage({"--ssd-streaming", "--ssd-streaming-windows", "yes"}, {"--ssd-streaming-windows", "'yes'"});
    expect_usage({"--ssd-streaming-windows", "on"}, {"--ssd-streaming-windows", "needs --ssd-streaming"});
    expect_usage({"--ssd-streaming", "--ssd-streaming-preload-experts", "4"},
                 {"--ssd-streaming-preload-experts", "--ssd-streaming-profile"});
    expect_usage({"--ssd-streaming", "--ssd-streaming-profile", "/nonexistent/ds4/p.txt"},
                 {"--ssd-streaming-profile", "does not exist"});
    expect_usage({"--ssd-streaming", "--ssd-streaming-profile", "/tmp"}, {"--ssd-streaming-profile", "directory"});
    expect_usage({"--ssd-streaming", "--ssd-streaming-profile", "/tmp/p", "--ssd-streaming-preload-experts", "-1"},
                 {"--ssd-streaming-preload-experts"});
}

TEST_F(Ds4OptionsTest, HelpAndVersionNeedNothingElse) {
    Ds4Options h = parse({"--help"}, false);  // no model file on disk: still fine
    EXPECT_TRUE(h.help);
    EXPECT_TRUE(parse({"-h", "--no-such-flag"}, false).help);
    EXPECT_TRUE(parse({"--version"}, false).version);
    EXPECT_TRUE(parse({"--temp", "-3", "--version"}, false).version);
    std::string text = ds4_help_text();
    for (const char* needle : {"cpu", "cuda", "--layers", "N:output", "-sys", "--ssd-streaming-cache-experts",
                               "--token-ids", "--dump-logits", "--role", "--listen", "--coordinator", "--nothink",
                               "--min-p", "--prefill-chunk", "--check-tensors", "--version"})
        EXPECT_NE(text.find(needle), std::string::npos) << needle;
    // Every value --chat-template takes is listed.
    EXPECT_NE(text.find("--chat-template NAME"), std::string::npos);
    for (const std::string& name : chat_template_names()) EXPECT_NE(text.find(name), std::string::npos) << name;
    EXPECT_NE(text.find("or raw"), std::string::npos);
}

TEST_F(Ds4OptionsTest, UnknownFlagsAndStrayArguments) {
    expect_usage({"--no-such-flag"}, {"unknown option", "'--no-such-flag'"});
    expect_usage({"--tem", "3"}, {"'--tem'"});
    expect_usage({"-x"}, {"'-x'"});
    expect_usage({"stray"}, {"unexpected argument", "'stray'"});
    expect_usage({"-p", "a", "b"}, {"'b'"});
    expect_usage({"-sysx", "a"}, {"'-sysx'"});
}

TEST_F(Ds4OptionsTest, MissingValues) {
    for (const char* flag : {"--model", "--prompt", "--prompt-file", "--tokens", "--ctx", "--threads",
                             "--prefill-chunk", "--temp", "--top-p", "--top-k", "--min-p", "--seed", "--system",
                             "--token-ids", "--dump-logits", "--backend", "--layers", "--role",
                             "--ssd-streaming-cache-experts"})
        expect_usage({flag}, {flag, "needs a value"});
    expect_usage({"-sys"}, {"--system", "needs a value"});
    expect_usage({"-t"}, {"--threads", "needs a value"});
    expect_usage({"--listen"}, {"--listen", "HOST and PORT"});
    expect_usage({"--role", "worker", "--listen", "host"}, {"--listen", "HOST and PORT"});
    expect_usage({"--coordinator", "host"}, {"--coordinator", "HOST and PORT"});
    expect_usage({"--temp", "--top-p", "0.5"}, {"--temp", "needs a value"});
    expect_usage({"-p", "--temp=1"}, {"--prompt", "needs a value"});
    expect_usage({"-n", "-t", "2"}, {"--tokens", "needs a value"});
    expect_usage({"--role", "worker", "--listen", "h", "--seed", "1"}, {"--listen", "HOST and PORT"});
}

TEST_F(Ds4OptionsTest, RepeatedOption) {
    expect_usage({"--temp", "1", "--temp", "2"}, {"--temp", "more than once"});
    expect_usage({"--role", "worker", "--listen", "a", "1", "--listen", "b", "2"}, {"--listen"});
}

TEST_F(Ds4OptionsTest, MalformedNumbers) {
    expect_usage({"-t", "4x"}, {"--threads", "integer", "'4x'"});
    expect_usage({"-t", "4.5"}, {"--threads", "integer"});
    expect_usage({"-c", ""}, {"--ctx"});
    expect_usage({"-c", "1e3"}, {"--ctx", "integer"});
    expect_usage({"-n", "ten"}, {"--tokens", "integer"});
    expect_usage({"--prefill-chunk", "0x10"}, {"--prefill-chunk"});
    expect_usage({"--temp", "warm"}, {"--temp", "number", "'warm'"});
    expect_usage({"--temp", "nan"}, {"--temp", "number"});
    expect_usage({"--temp", "inf"}, {"--temp", "number"});
    expect_usage({"--top-p", "0.5.1"}, {"--top-p", "number"});
    expect_usage({"--min-p", "1e999"}, {"--min-p", "number"});
    expect_usage({"--top-k", "-"}, {"--top-k", "integer"});
    expect_usage({"--seed", "-1"}, {"--seed", "non-negative"});
    expect_usage({"--seed", "18446744073709551616"}, {"--seed"});
    expect_usage({"--seed", "12ab"}, {"--seed"});
    expect_usage({"-t", "99999999999999999999999"}, {"--threads"});
}

TEST_F(Ds4OptionsTest, OutOfRange) {
    expect_usage({"-t", "0"}, {"--threads", "[1, 4096]", "got 0"});
    expect_usage({"-t", "-2"}, {"--threads"});
    expect_usage({"-t", "5000"}, {"--threads"});
    expect_usage({"-c", "0"}, {"--ctx", "got 0"});
    expect_usage({"-c", "16777217"}, {"--ctx"});
    expect_usage({"--prefill-chunk", "0"}, {"--prefill-chunk"});
    expect_usage({"-n", "-2"}, {"--tokens"});
    expect_usage({"--temp", "-0.1"}, {"--temp", ">= 0", "got -0.1"});
    expect_usage({"--top-p", "1.5"}, {"--top-p must be in (0, 1], got 1.5"});
    expect_usage({"--top-p", "0"}, {"--top-p", "(0, 1]"});
    expect_usage({"--min-p", "-0.01"}, {"--min-p", "[0, 1]"});
    expect_usage({"--min-p", "1.01"}, {"--min-p", "[0, 1]"});
    expect_usage({"--top-k", "-1"}, {"--top-k", "got -1"});
    expect_usage({"--role", "worker", "--listen", "h", "0"}, {"--listen", "[1, 65535]", "got 0"});
    expect_usage({"--role", "worker", "--listen", "h", "65536"}, {"--listen", "65536"});
    expect_usage({"--role", "worker", "--listen", "h", "http"}, {"--listen", "'http'"});
    expect_usage({"--role", "worker", "--listen", "", "80"}, {"--listen", "HOST"});
    expect_usage({"--role", "coordinator", "--layers", "0:3", "--coordinator", "h", "-5"}, {"--coordinator"});
    expect_usage({"--role", "coordinator", "--layers", "0:3", "--listen", "127.0.0.1", "9", "--dist-activation-bits", "4"},
                 {"--dist-activation-bits", "32, 16 or 8"});
    expect_usage({"--role", "coordinator", "--layers", "0:3", "--listen", "127.0.0.1", "9", "--dist-activation-bits", "64"},
                 {"--dist-activation-bits"});
    expect_usage({"--role", "coordinator", "--layers", "0:3", "--listen", "127.0.0.1", "9", "--dist-prefill-chunk", "0"},
                 {"--dist-prefill-chunk"});
    for (const char* bad : {"0", "-1", "65", "two", ""})
        expect_usage({"--role", "coordinator", "--layers", "0:3", "--listen", "127.0.0.1", "9", "--dist-prefill-window", bad},
                     {"--dist-prefill-window"});
    EXPECT_EQ(Ds4Options{}.dist_prefill_window, 4);
}

// Which role needs what: one sentence naming the flag, before any load.
TEST_F(Ds4OptionsTest, PipelineRoles) {
    const std::vector<std::string> C = {"--role", "coordinator", "--layers", "0:3", "--listen", "127.0.0.1", "9000"};
    const std::vector<std::string> W = {"--role", "worker", "--layers", "4:output", "--coordinator", "127.0.0.1", "9000"};
    parse(C);
    parse(W);
    auto with = [](std::vector<std::string> v, std::initializer_list<std::string> more) {
        v.insert(v.end(), more);
        return v;
    };
    expect_usage({"--role", "coordinator", "--listen", "127.0.0.1", "9"}, {"--role coordinator needs --layers"});
    expect_usage({"--role", "coordinator", "--layers", "2:5", "--listen", "127.0.0.1", "9"}, {"block 0", "2:5"});
    expect_usage({"--role", "coordinator", "--layers", "0:output", "--listen", "127.0.0.1", "9"}, {"no block for a worker"});
    expect_usage({"--role", "coordinator", "--layers", "0:3"}, {"--role coordinator needs --listen"});
    expect_usage(with(C, {"--coordinator", "127.0.0.1", "1"}), {"--coordinator is a worker's flag"});
    expect_usage({"--role", "worker", "--coordinator", "127.0.0.1", "9"}, {"--role worker needs --layers"});
    expect_usage({"--role", "worker", "--layers", "0:3", "--coordinator", "127.0.0.1", "9"}, {"after block 0"});
    expect_usage({"--role", "worker", "--layers", "4:7"}, {"--role worker needs --coordinator"});
    expect_usage({"--role", "worker", "--layers", "4:7", "--coordinator", "10.0.0.1", "9"}, {"needs --listen"});
    expect_usage(with(W, {"-p", "hi"}), {"--prompt", "coordinator's"});
    expect_usage(with(W, {"--dist-activation-bits", "16"}), {"--dist-activation-bits", "coordinator's"});
    expect_usage(with(W, {"--dist-prefill-window", "2"}), {"--dist-prefill-window", "coordinator's"});
    for (const char* f : {"--layers", "--debug", "--dist-activation-bits", "--dist-prefill-chunk", "--dist-prefill-window"}) {
        std::vector<std::string> a = {f};
        if (std::string(f) == "--layers") a.push_back("0:3");
        if (std::string(f) == "--dist-activation-bits") a.push_back("16");
        if (std::string(f) == "--dist-prefill-chunk" || std::string(f) == "--dist-prefill-window") a.push_back("16");
        expect_usage(a, {f, "needs --role"});
    }
    // Off loopback only with a cluster key.
    ::unsetenv("DS4_CLUSTER_KEY");
    expect_usage({"--role", "coordinator", "--layers", "0:3", "--listen", "0.0.0.0", "9000"}, {"0.0.0.0", "cluster key"});
    expect_usage({"--role", "worker", "--layers", "4:7", "--coordinator", "10.1.2.3", "9", "--listen", "10.1.2.4", "9"},
                 {"10.", "cluster key"});
    ::setenv("DS4_CLUSTER_KEY", "0123456789abcdef0123", 1);
    EXPECT_EQ(parse({"--role", "coordinator", "--layers", "0:3", "--listen", "0.0.0.0", "9000"}).listen_host, "0.0.0.0");
    ::unsetenv("DS4_CLUSTER_KEY");
    EXPECT_EQ(parse({"--role", "coordinator", "--layers", "0:3", "--listen", "0.0.0.0", "9000", "--cluster-key-file",
                     text_.path()})
                  .cluster_key_file,
              text_.path());
    expect_usage(with(C, {"--cluster-key-file", "/nonexistent/key"}), {"--cluster-key-file", "does not exist"});
}

TEST_F(Ds4OptionsTest, RandomNumbersRoundTripOrFail) {
    const uint64_t seed = ds4::test::test_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 200; ++i) {
        int64_t t = std::uniform_int_distribution<int64_t>(-10000, 10000)(rng);
        std::string ts = std::to_string(t);
        if (t >= 1 && t <= kMaxThreads)
            EXPECT_EQ(parse({"-t", ts}).threads, t);
        else
            expect_usage({"-t", ts}, {"--threads", ts});

        int64_t c = std::uniform_int_distribution<int64_t>(-5, int64_t(kMaxContext) * 2)(rng);
        std::string cs = std::to_string(c);
        if (c >= 1 && c <= kMaxContext)
            EXPECT_EQ(parse({"-c", cs}).ctx, c);
        else
            expect_usage({"-c", cs}, {"--ctx", cs});

        double p = std::uniform_real_distribution<double>(-0.5, 1.5)(rng);
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.6f", p);
        double pv = std::stod(buf);
        if (pv > 0 && pv <= 1)
            EXPECT_FLOAT_EQ(parse({"--top-p", buf}).top_p, static_cast<float>(pv));
        else
            expect_usage({"--top-p", buf}, {"--top-p", "(0, 1]", buf});
        if (pv >= 0 && pv <= 1)
            EXPECT_FLOAT_EQ(parse({"--min-p", buf}).min_p, static_cast<float>(pv));
        else
            expect_usage({"--min-p", buf}, {"--min-p", "[0, 1]", buf});

        int port = std::uniform_int_distribution<int>(-100, 70000)(rng);
        std::string ps = std::to_string(port);
        if (port >= 1 && port <= 65535)
            EXPECT_EQ(parse({"--role", "worker", "--layers", "1:2", "--coordinator", "127.0.0.1", "9", "--listen", "127.0.0.1", ps}).listen_port, port);
        else
            expect_usage({"--role", "worker", "--layers", "1:2", "--coordinator", "127.0.0.1", "9", "--listen", "127.0.0.1", ps}, {"--listen", ps});

        uint64_t s = rng();
        EXPECT_EQ(*parse({"--seed", std::to_string(s)}).seed, s);
    }
}

TEST_F(Ds4OptionsTest, EnumeratedValues) {
    expect_usage({"--backend", "metal"}, {"--backend", "cpu or cuda", "'metal'"});
    expect_usage({"--backend", "CPU"}, {"--backend"});
    expect_usage({"--role", "boss"}, {"--role", "coordinator or worker", "'boss'"});
}

TEST_F(Ds4OptionsTest, LayersValue) {
    expect_usage({"--layers", "3"}, {"--layers", "A:B, N:output or A:B,output", "'3'"});
    expect_usage({"--layers", "0:3,output,output"}, {"--layers", "'0:3,output,output'"});
    expect_usage({"--layers", "0:output,output"}, {"--layers"});
    // The head apart from the last blocks is the coordinator's, never a worker's.
    expect_usage({"--layers", "2:3,output", "--role", "worker", "--coordinator", "127.0.0.1", "9"},
                 {"--role worker", "2:3,output", "coordinator"});
    const Ds4Options c =
        parse({"--layers", "0:3,output", "--role", "coordinator", "--listen", "127.0.0.1", "9"});
    EXPECT_EQ(c.layers->end, 4);
    EXPECT_TRUE(c.layers->head_apart(40));
    expect_usage({"--layers", "3-4"}, {"--layers", "'3-4'"});
    expect_usage({"--layers", "a:b"}, {"--layers"});
    expect_usage({"--layers", "4:3"}, {"--layers", "A <= B", "'4:3'"});
    expect_usage({"--layers", "1:2:3"}, {"--layers"});
    expect_usage({"--layers", ":5"}, {"--layers"});
    expect_usage({"--layers", "-1:5"}, {"--layers"});
    expect_usage({"--layers", "0:Output"}, {"--layers"});
    EXPECT_EQ(parse({"--layers", "7:7", "--role", "worker", "--coordinator", "127.0.0.1", "9"}).layers->end, 8);
}

TEST_F(Ds4OptionsTest, ExpertCacheValue) {
    for (const char* bad : {"0", "GB", "12TB", "-4", "1.5", "0GB", "x", "12 GB", "1e3GB"})
        expect_usage({"--ssd-streaming", "--ssd-streaming-cache-experts", bad}, {"--ssd-streaming-cache-experts"});
}

// --simulate-used-memory: a size in GiB up to the machine's RAM (drawn
// fresh: whole and quarter GiB round-trip exactly to bytes), 0 for none;
// anything else, more than the RAM, or without --ssd-streaming is refused.
TEST_F(Ds4OptionsTest, SimulateUsedMemory) {
    const uint64_t seed = ds4::test::test_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const uint64_t ram = total_host_memory();
    ASSERT_GT(ram, uint64_t{1} << 30) << "no MemTotal in /proc/meminfo";
    const uint64_t ram_quarters = ram / (uint64_t{1} << 28);  // whole quarters of a GiB the machine has
    EXPECT_EQ(parse({"--ssd-streaming"}).ssd.simulated_used, 0u);
    EXPECT_EQ(parse({"--ssd-streaming", "--simulate-used-memory", "0"}).ssd.simulated_used, 0u);
    for (int i = 0; i < 20; ++i) {
        const uint64_t q = std::uniform_int_distribution<uint64_t>(0, ram_quarters)(rng);
        char text[32];
        const char* units[] = {"GB", "gb", "G", "GiB"};
        std::snprintf(text, sizeof text, "%.2f%s", double(q) / 4.0, units[i % 4]);
        SCOPED_TRACE(text);
        EXPECT_EQ(parse({"--ssd-streaming", "--simulate-used-memory", text}).ssd.simulated_used, q << 28);
    }
    // One GiB past the RAM, rounded up to whole GiB: more than the machine.
    const std::string over = std::to_string(ram / (uint64_t{1} << 30) + 1) + "GB";
    expect_usage({"--ssd-streaming", "--simulate-used-memory", over}, {"--simulate-used-memory", "RAM"});
    for (const char* bad : {"-1GB", "-0.5GB", "12", "x", "GB", "12TB", "12 GB", "1e3GB", "nanGB", "infGB", "2e9GB", ""})
        expect_usage({"--ssd-streaming", "--simulate-used-memory", bad}, {"--simulate-used-memory"});
    expect_usage({"--simulate-used-memory", "1GB"}, {"--simulate-used-memory", "needs --ssd-streaming"});
    expect_usage({"--ssd-streaming", "--simulate-used-memory"}, {"--simulate-used-memory", "needs a value"});
    EXPECT_NE(ds4_help_text().find("--simulate-used-memory NGB"), std::string::npos);
}

TEST_F(Ds4OptionsTest, Contradictions) {
    expect_usage({"-p", "x", "--prompt-file", text_.path()}, {"--prompt", "--prompt-file"});
    expect_usage({"--token-ids", ids_.path()}, {"--token-ids", "--dump-logits"});
    expect_usage({"--dump-logits", "/tmp/out.bin"}, {"--dump-logits", "--token-ids"});
    expect_usage({"-p", "x", "--token-ids", ids_.path(), "--dump-logits", "/tmp/o"}, {"--token-ids", "--prompt"});
    expect_usage({"--role", "coordinator"}, {"--role coordinator", "--layers"});
    expect_usage({"--role", "worker"}, {"--role worker", "--layers"});
    expect_usage({"--listen", "h", "80"}, {"--listen", "--role"});
    expect_usage({"--coordinator", "h", "80"}, {"--coordinator", "--role"});
    expect_usage({"--ssd-streaming-cache-experts", "8"}, {"--ssd-streaming-cache-experts", "--ssd-streaming"});
    expect_usage({"--think", "--nothink"}, {"--think", "--nothink"});
}

TEST_F(Ds4OptionsTest, Files) {
    expect_usage({"-m", "/nonexistent/ds4/model.gguf"}, {"--model", "'/nonexistent/ds4/model.gguf'", "does not exist"},
                 false);
    expect_usage({}, {"--model", "./ds4flash.gguf"}, false);  // the default, absent here
    expect_usage({"-m", "/tmp"}, {"--model", "directory"}, false);
    expect_usage({"-m", "/dev/null"}, {"--model", "not a regular file"}, false);
    expect_usage({"-m", ""}, {"--model"}, false);
    expect_usage({"--prompt-file", "/nonexistent/p.txt"}, {"--prompt-file", "does not exist"});
    expect_usage({"--token-ids", "/nonexistent/ids", "--dump-logits", "/tmp/o"}, {"--token-ids", "does not exist"});
    expect_usage({"--token-ids", ids_.path(), "--dump-logits", "/nonexistent/dir/o"},
                 {"--dump-logits", "'/nonexistent/dir'"});
    if (::geteuid() != 0) {  // root reads everything
        TempFile unreadable;
        ::chmod(unreadable.path().c_str(), 0);
        expect_usage({"-m", unreadable.path()}, {"--model", "not readable"}, false);
    }
}

TEST_F(Ds4OptionsTest, FlagProblemsComeBeforeMissingFiles) {
    expect_usage({"-m", "/nonexistent/m.gguf", "--top-p", "2"}, {"--top-p"}, false);
    expect_usage({"-m", "/nonexistent/m.gguf", "--bogus"}, {"--bogus"}, false);
}

TEST_F(Ds4OptionsTest, ChatTemplate) {
    EXPECT_EQ(parse({"-p", "x"}).chat_template, "");  // the model's own
    for (const std::string& name : chat_template_names()) EXPECT_EQ(parse({"--chat-template", name}).chat_template, name);
    EXPECT_EQ(parse({"--chat-template=raw"}).chat_template, "raw");
    for (const char* bad : {"llama3", "Qwen3", "raw ", "", "chatml", "qwen3,deepseek4"})
        expect_usage({"--chat-template", bad}, {"--chat-template", "qwen3-instruct-2507", "raw", "got"});
    expect_usage({"--chat-template"}, {"--chat-template", "needs a value"});
    expect_usage({"--chat-template", "raw", "--token-ids", ids_.path(), "--dump-logits", "/tmp/o"},
                 {"--chat-template", "--token-ids"});
}

TEST_F(Ds4OptionsTest, ThinkMax) {
    Ds4Options o = parse({"-p", "x", "--think-max"});
    EXPECT_TRUE(o.think);
    EXPECT_TRUE(o.think_max);
    EXPECT_FALSE(parse({"-p", "x"}).think_max);
    expect_usage({"-p", "x", "--think-max", "--nothink"}, {"--think-max", "--nothink"});
}

}  // namespace
}  // namespace ds4

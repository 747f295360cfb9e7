// Command-line rules of `ds4-server` for its lifecycle and HTTP-layer flags
// (--shutdown-timeout, --cors, --ssl-cert-file/--ssl-key-file): every
// accepted form, and for every rejected one a UsageError of one line naming
// the flag. Timeouts and ports are drawn fresh each run (seed on failure).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "cli/server_options.h"
#include "common/error.h"
#include "support/temp_file.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

using test::TempFile;

class ServerOptionsTest : public ::testing::Test {
protected:
    TempFile model_;
    TempFile cert_{"-----BEGIN CERTIFICATE-----\n"};
    TempFile key_{"-----BEGIN PRIVATE KEY-----\n"};
    uint64_t seed_ = test::test_seed();
    std::mt19937_64 rng_{seed_};

    ServerCliOptions parse(std::vector<std::string> args) {
        std::vector<std::string> all = {"ds4-server", "-m", model_.path()};
        all.insert(all.end(), args.begin(), args.end());
        std::vector<const char*> argv;
        for (auto& a : all) argv.push_back(a.c_str());
        argv.push_back(nullptr);
        return parse_server_options(static_cast<int>(all.size()), argv.data());
    }

    // Expects a UsageError whose single-line message contains every needle.
    void expect_usage(std::vector<std::string> args, std::vector<std::string> needles) {
        std::string joined;
        for (auto& a : args) joined += a + " ";
        SCOPED_TRACE("args: " + joined + "; " + test::seed_note(seed_));
        try {
            parse(args);
            ADD_FAILURE() << "no UsageError";
        } catch (const UsageError& e) {
            const std::string msg = e.what();
            EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
            for (auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "message: " << msg << "\nwanted: " << n;
        } catch (const std::exception& e) {
            ADD_FAILURE() << "wrong exception type: " << e.what();
        }
    }
};

TEST_F(ServerOptionsTest, DefaultsAreNoCorsNoTlsAndThirtySeconds) {
    const ServerCliOptions o = parse({});
    EXPECT_EQ(o.shutdown_timeout, 30.0);
    EXPECT_TRUE(o.cors_origins.empty());
    EXPECT_TRUE(o.ssl_cert_file.empty());
    EXPECT_TRUE(o.ssl_key_file.empty());
}

TEST_F(ServerOptionsTest, ShutdownTimeoutTakesSecondsFromZero) {
    SCOPED_TRACE(test::seed_note(seed_));
    EXPECT_EQ(parse({"--shutdown-timeout", "0"}).shutdown_timeout, 0.0);
    const int whole = int(rng_() % 86401);
    EXPECT_EQ(parse({"--shutdown-timeout", std::to_string(whole)}).shutdown_timeout, double(whole));
    EXPECT_EQ(parse({"--shutdown-timeout", "2.5"}).shutdown_timeout, 2.5);
    expect_usage({"--shutdown-timeout", "-1"}, {"--shutdown-timeout", "-1"});
    expect_usage({"--shutdown-timeout", std::to_string(86401 + rng_() % 100000)}, {"--shutdown-timeout"});
    expect_usage({"--shutdown-timeout", "soon"}, {"--shutdown-timeout", "soon"});
    expect_usage({"--shutdown-timeout"}, {"--shutdown-timeout"});
}

TEST_F(ServerOptionsTest, CorsOriginsAreRepeatableAndLowercased) {
    SCOPED_TRACE(test::seed_note(seed_));
    const std::string port = std::to_string(1 + rng_() % 65535);
    const ServerCliOptions o =
        parse({"--cors", "https://App.Example.com", "--cors", "http://localhost:" + port, "--cors", "http://[::1]:" + port,
               "--cors", "chrome-extension://abcdef", "--cors", "http://[::1]"});
    EXPECT_EQ(o.cors_origins, (std::vector<std::string>{"https://app.example.com", "http://localhost:" + port,
                                                        "http://[::1]:" + port, "chrome-extension://abcdef",
                                                        "http://[::1]"}));
    EXPECT_EQ(parse({"--cors", "*"}).cors_origins, std::vector<std::string>{"*"});
}

TEST_F(ServerOptionsTest, CorsRefusesWhatNoBrowserSends) {
    expect_usage({"--cors", "https://a.example/"}, {"--cors", "has a path", "scheme://host"});
    expect_usage({"--cors", "https://a.example/app"}, {"--cors", "has a path"});
    expect_usage({"--cors", "a.example"}, {"--cors", "'a.example'", "not an origin"});
    expect_usage({"--cors", "https://"}, {"--cors", "no host"});
    expect_usage({"--cors", "https://a.example:http"}, {"--cors", "port"});
    expect_usage({"--cors", "https://a b"}, {"--cors", "character"});
    expect_usage({"--cors", "https://*.example.com"}, {"--cors", "character"});
    expect_usage({"--cors", "1http://a"}, {"--cors", "not an origin"});
    expect_usage({"--cors", "*", "--cors", "https://a.example"}, {"--cors *", "every origin"});
    expect_usage({"--cors"}, {"--cors"});
}

TEST_F(ServerOptionsTest, TlsNeedsBothReadableFiles) {
    const ServerCliOptions o = parse({"--ssl-cert-file", cert_.path(), "--ssl-key-file", key_.path()});
    EXPECT_EQ(o.ssl_cert_file, cert_.path());
    EXPECT_EQ(o.ssl_key_file, key_.path());
    expect_usage({"--ssl-cert-file", cert_.path()}, {"--ssl-cert-file needs --ssl-key-file"});
    expect_usage({"--ssl-key-file", key_.path()}, {"--ssl-key-file needs --ssl-cert-file"});
    expect_usage({"--ssl-cert-file", "/nonexistent/cert.pem", "--ssl-key-file", key_.path()},
                 {"--ssl-cert-file", "cannot read", "/nonexistent/cert.pem"});
    expect_usage({"--ssl-cert-file", cert_.path(), "--ssl-key-file", "/tmp"}, {"--ssl-key-file", "cannot read"});
    // A file this process may not read (root reads anything: checked only
    // where the permission bits bind).
    if (::geteuid() != 0) {
        TempFile locked;
        ::chmod(locked.path().c_str(), 0);
        expect_usage({"--ssl-cert-file", cert_.path(), "--ssl-key-file", locked.path()}, {"--ssl-key-file", "cannot read"});
    }
}

// The fast CUDA decode mode is a backend option like the CLI's: off by
// default, on with auto or cuda, and a bad command line with the CPU
// (exact by construction: asking for the mode there is a mistake).
TEST_F(ServerOptionsTest, Int8ActivationsNeedAGpuBackend) {
    EXPECT_FALSE(parse({}).int8_activations);
    EXPECT_TRUE(parse({"--int8-activations"}).int8_activations);
    EXPECT_TRUE(parse({"--backend", "auto", "--int8-activations"}).int8_activations);
    expect_usage({"--backend", "cpu", "--int8-activations"}, {"--int8-activations", "CUDA mode"});
    expect_usage({"--int8-activations", "--backend", "cpu"}, {"--int8-activations", "CUDA mode"});
    EXPECT_FALSE(parse({}).exact);
    EXPECT_TRUE(parse({"--exact"}).exact);
    EXPECT_TRUE(parse({"--backend", "cpu", "--exact"}).exact);  // the CPU is exact anyway
    expect_usage({"--exact", "--int8-activations"}, {"--exact", "--int8-activations", "contradict"});
}

TEST_F(ServerOptionsTest, BatchSizeIsPositiveTokens) {
    SCOPED_TRACE(test::seed_note(seed_));
    EXPECT_EQ(parse({}).batch_size, 2048);
    const int n = 1 + int(rng_() % (1 << 24));
    EXPECT_EQ(parse({"--batch-size", std::to_string(n)}).batch_size, n);
    EXPECT_EQ(parse({"-b", "7"}).batch_size, 7);
    expect_usage({"--batch-size", "0"}, {"--batch-size", "0"});
    expect_usage({"-b", "-3"}, {"--batch-size"});
    expect_usage({"--batch-size", std::to_string((1 << 24) + 1 + rng_() % 1000)}, {"--batch-size"});
    expect_usage({"--batch-size", "lots"}, {"--batch-size", "lots"});
    expect_usage({"--batch-size"}, {"--batch-size"});
}

TEST_F(ServerOptionsTest, HelpNamesTheNewFlags) {
    const std::string h = server_help_text();
    for (const char* f : {"--shutdown-timeout", "--cors", "--ssl-cert-file", "--ssl-key-file", "--int8-activations",
                          "--batch-size", "--exact"})
        EXPECT_NE(h.find(f), std::string::npos) << f;
}

}  // namespace
}  // namespace ds4

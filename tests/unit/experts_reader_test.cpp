// The expert reader on real files: exact bytes at random offsets; a file
// truncated or rewritten in place while in use, a read past the end, and the
// fault hook each give one sentence naming the file, never wrong bytes.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "common/error.h"
#include "experts/expert_reader.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

namespace fs = std::filesystem;

struct RandomFile {
    explicit RandomFile(std::mt19937_64& rng) {
        path = fs::temp_directory_path() / ("ds4-reader-" + std::to_string(rng()) + ".bin");
        bytes.resize(100000 + rng() % 100000);
        for (auto& b : bytes) b = uint8_t(rng());
        std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    }
    ~RandomFile() { fs::remove(path); }
    fs::path path;
    std::vector<uint8_t> bytes;
};

::testing::AssertionResult fails_with(const std::function<void()>& f, const std::string& needle) {
    try {
        f();
    } catch (const Error& e) {
        if (std::string(e.what()).find(needle) != std::string::npos) return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << "error without '" << needle << "': " << e.what();
    }
    return ::testing::AssertionFailure() << "no error";
}

class ExpertReaderTest : public ::testing::Test {
protected:
    void SetUp() override {
        seed_ = ds4::test::test_seed();
        rng_.seed(seed_);
    }
    uint64_t seed_ = 0;
    std::mt19937_64 rng_;
};

TEST_F(ExpertReaderTest, ReadsExactBytes) {
    SCOPED_TRACE("seed " + std::to_string(seed_));
    RandomFile f(rng_);
    ExpertReader r(f.path.string());
    for (int i = 0; i < 50; ++i) {
        const uint64_t off = rng_() % f.bytes.size(), n = rng_() % (f.bytes.size() - off + 1);
        std::vector<uint8_t> got(n);
        r.read(off, n, got.data(), "a test range");
        ASSERT_TRUE(std::equal(got.begin(), got.end(), f.bytes.begin() + off)) << "offset " << off << " size " << n;
    }
    EXPECT_EQ(r.reads(), 50u);
}

TEST_F(ExpertReaderTest, PastTheEndTruncatedOrRewrittenFileIsOneSentence) {
    SCOPED_TRACE("seed " + std::to_string(seed_));
    RandomFile f(rng_);
    std::vector<uint8_t> buf(4096);
    {
        ExpertReader r(f.path.string());
        EXPECT_TRUE(fails_with([&] { r.read(f.bytes.size() - 100, 4096, buf.data(), "expert 7 of 'x'"); },
                               "the file ended after"));
    }
    {
        ExpertReader r(f.path.string());
        ASSERT_EQ(0, truncate(f.path.c_str(), off_t(f.bytes.size() / 2)));
        EXPECT_TRUE(fails_with([&] { r.read(0, 16, buf.data(), "expert 3 of 'blk.0.ffn_up_exps.weight'"); },
                               "changed while in use"));
        EXPECT_TRUE(fails_with([&] { r.read(0, 16, buf.data(), "expert 3 of 'blk.0.ffn_up_exps.weight'"); },
                               f.path.string()));
    }
    {
        std::ofstream(f.path, std::ios::binary | std::ios::trunc)
            .write(reinterpret_cast<const char*>(f.bytes.data()), std::streamsize(f.bytes.size()));
        ExpertReader r(f.path.string());
        // Same size, new contents and a later modification time.
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::fstream(f.path, std::ios::binary | std::ios::in | std::ios::out).write("x", 1);
        EXPECT_TRUE(fails_with([&] { r.read(0, 16, buf.data(), "an expert"); }, "changed while in use"));
    }
    EXPECT_TRUE(fails_with([] { ExpertReader("/nonexistent/ds4-model.gguf"); }, "cannot open /nonexistent/ds4-model.gguf"));
}

TEST_F(ExpertReaderTest, FaultHookFailsTheNthRead) {
    RandomFile f(rng_);
    const int n = 1 + int(rng_() % 5);
    setenv("DS4_TEST_FAIL_READ", std::to_string(n).c_str(), 1);
    ExpertReader r(f.path.string());
    unsetenv("DS4_TEST_FAIL_READ");
    std::vector<uint8_t> buf(64);
    for (int i = 1; i < n; ++i) r.read(0, 64, buf.data(), "an expert");
    EXPECT_TRUE(fails_with([&] { r.read(0, 64, buf.data(), "an expert"); }, "Input/output error"));
    r.read(0, 64, buf.data(), "an expert");  // only that read
}

}  // namespace
}  // namespace ds4

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
    explicit RandomFile(std::mt19937_64& rng, size_t min_bytes = 100000) {
        path = fs::temp_directory_path() / ("ds4-reader-" + std::to_string(rng()) + ".bin");
        bytes.resize(min_bytes + rng() % min_bytes);
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

// Every engine the reader can pick: io_uring with O_DIRECT (where the file
// system takes it; else through the page cache), io_uring through the page
// cache, and the pread pool.
struct Engine {
    const char* name;
    ReaderOptions options;
};
const Engine kEngines[] = {
    {"io_uring_direct", ReaderOptions{ReadMethod::uring, true, 8, 4}},
    {"io_uring_buffered", ReaderOptions{ReadMethod::uring, false, 8, 4}},
    {"pread", ReaderOptions{ReadMethod::pread, false, 8, 4}},
};

class ExpertReaderTest : public ::testing::TestWithParam<Engine> {
protected:
    void SetUp() override {
        seed_ = ds4::test::test_seed();
        rng_.seed(seed_);
        // A kernel or sandbox without io_uring (Docker's default seccomp
        // profile refuses it) runs only the pread engine's cases; the
        // automatic choice falls back to it there.
        if (GetParam().options.method == ReadMethod::uring) {
            const fs::path probe = fs::temp_directory_path() / ("ds4-reader-probe-" + std::to_string(seed_));
            std::ofstream(probe) << "x";
            std::string refused;
            try {
                ExpertReader r(probe.string(), GetParam().options);
            } catch (const Error& e) {
                refused = e.what();
            }
            fs::remove(probe);
            if (!refused.empty()) GTEST_SKIP() << refused;
        }
    }
    ExpertReader open(const fs::path& p) const { return ExpertReader(p.string(), GetParam().options); }
    uint64_t seed_ = 0;
    std::mt19937_64 rng_;
};

TEST_P(ExpertReaderTest, ReadsExactBytes) {
    SCOPED_TRACE("seed " + std::to_string(seed_));
    RandomFile f(rng_);
    ExpertReader r = open(f.path);
    for (int i = 0; i < 50; ++i) {
        const uint64_t off = rng_() % f.bytes.size(), n = rng_() % (f.bytes.size() - off + 1);
        std::vector<uint8_t> got(n);
        r.read(off, n, got.data(), "a test range");
        ASSERT_TRUE(std::equal(got.begin(), got.end(), f.bytes.begin() + off)) << "offset " << off << " size " << n;
    }
    EXPECT_EQ(r.reads(), 50u);
}

// Batches as a MoE step issues them: many ranges at once, some longer than
// a read piece (2 MiB), at unaligned offsets into unaligned destinations.
TEST_P(ExpertReaderTest, BatchesReadExactBytes) {
    SCOPED_TRACE("seed " + std::to_string(seed_));
    RandomFile f(rng_, 6 << 20);
    ExpertReader r = open(f.path);
    SCOPED_TRACE(r.describe());
    for (int round = 0; round < 6; ++round) {
        const size_t n = 1 + rng_() % 40;
        std::vector<std::vector<uint8_t>> got(n);
        std::vector<ExpertReader::Request> reqs;
        for (size_t i = 0; i < n; ++i) {
            const uint64_t off = rng_() % f.bytes.size();
            const uint64_t len = rng_() % 4 == 0 ? rng_() % (f.bytes.size() - off + 1) : rng_() % std::min<uint64_t>(70000, f.bytes.size() - off + 1);
            got[i].resize(len + 1);
            reqs.push_back({off, len, got[i].data() + 1, "range " + std::to_string(i)});
        }
        r.read_all(reqs);
        for (size_t i = 0; i < n; ++i)
            ASSERT_TRUE(std::equal(got[i].begin() + 1, got[i].end(), f.bytes.begin() + reqs[i].offset))
                << "round " << round << " range " << i << " offset " << reqs[i].offset << " size " << reqs[i].bytes;
    }
}

TEST_P(ExpertReaderTest, AFailedRangeInABatchIsNamed) {
    SCOPED_TRACE("seed " + std::to_string(seed_));
    RandomFile f(rng_);
    ExpertReader r = open(f.path);
    std::vector<uint8_t> a(4096), b(8192);
    EXPECT_TRUE(fails_with(
        [&] {
            r.read_all({{0, 4096, a.data(), "expert 1 of 'x'"}, {f.bytes.size() - 10, 8192, b.data(), "expert 2 of 'y'"}});
        },
        "reading expert 2 of 'y' from " + f.path.string() + " failed: the file ended after " +
            std::to_string(f.bytes.size()) + " bytes, 8182 bytes short"));
    // The reader stays usable after a failed batch.
    r.read(16, 4096, a.data(), "expert 1 of 'x'");
    EXPECT_TRUE(std::equal(a.begin(), a.end(), f.bytes.begin() + 16));
}

TEST_P(ExpertReaderTest, PastTheEndTruncatedOrRewrittenFileIsOneSentence) {
    SCOPED_TRACE("seed " + std::to_string(seed_));
    RandomFile f(rng_);
    std::vector<uint8_t> buf(4096);
    {
        ExpertReader r = open(f.path);
        EXPECT_TRUE(fails_with([&] { r.read(f.bytes.size() - 100, 4096, buf.data(), "expert 7 of 'x'"); },
                               "the file ended after"));
    }
    {
        ExpertReader r = open(f.path);
        ASSERT_EQ(0, truncate(f.path.c_str(), off_t(f.bytes.size() / 2)));
        EXPECT_TRUE(fails_with([&] { r.read(0, 16, buf.data(), "expert 3 of 'blk.0.ffn_up_exps.weight'"); },
                               "changed while in use"));
        EXPECT_TRUE(fails_with([&] { r.read(0, 16, buf.data(), "expert 3 of 'blk.0.ffn_up_exps.weight'"); },
                               f.path.string()));
    }
    {
        std::ofstream(f.path, std::ios::binary | std::ios::trunc)
            .write(reinterpret_cast<const char*>(f.bytes.data()), std::streamsize(f.bytes.size()));
        ExpertReader r = open(f.path);
        // Same size, new contents and a later modification time.
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::fstream(f.path, std::ios::binary | std::ios::in | std::ios::out).write("x", 1);
        EXPECT_TRUE(fails_with([&] { r.read(0, 16, buf.data(), "an expert"); }, "changed while in use"));
    }
    EXPECT_TRUE(fails_with([&] { open("/nonexistent/ds4-model.gguf"); }, "cannot open /nonexistent/ds4-model.gguf"));
}

TEST_P(ExpertReaderTest, FaultHookFailsTheNthRead) {
    RandomFile f(rng_);
    const int n = 1 + int(rng_() % 5);
    setenv("DS4_TEST_FAIL_READ", std::to_string(n).c_str(), 1);
    ExpertReader r = open(f.path);
    unsetenv("DS4_TEST_FAIL_READ");
    std::vector<uint8_t> buf(64);
    for (int i = 1; i < n; ++i) r.read(0, 64, buf.data(), "an expert");
    EXPECT_TRUE(fails_with([&] { r.read(0, 64, buf.data(), "an expert"); }, "Input/output error"));
    r.read(0, 64, buf.data(), "an expert");  // only that read
}

INSTANTIATE_TEST_SUITE_P(Engines, ExpertReaderTest, ::testing::ValuesIn(kEngines),
                         [](const ::testing::TestParamInfo<Engine>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace ds4

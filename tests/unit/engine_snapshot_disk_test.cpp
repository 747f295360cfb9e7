// The disk KV cache's files and index, on real files in a fresh directory:
// snapshots of random content come back bit for bit with either codec; a
// truncated, corrupted or foreign file is refused with a sentence (any cut,
// any flipped byte); the tier finds the longest stored prefix, survives a
// restart, stays within its byte budget by least recent use, ignores bad
// files with one warning each, removes a killed writer's leftovers and
// drops a file whose payload went bad.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "engine/snapshot_disk.h"
#include "engine/snapshot_file.h"
#include "support/test_seed.h"

namespace fs = std::filesystem;

namespace ds4 {
namespace {

class TempDir {
public:
    TempDir() {
        std::string t = (fs::temp_directory_path() / "ds4-snapshot-XXXXXX").string();
        if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed");
        path = t;
    }
    ~TempDir() { fs::remove_all(path); }
    std::string path;
};

SessionSnapshot random_snapshot(std::mt19937_64& rng, std::vector<int32_t> tokens, std::vector<size_t> sizes) {
    SessionSnapshot s;
    s.tokens = tokens;
    s.state.n_past = static_cast<int64_t>(tokens.size());
    s.state.tokens = std::move(tokens);
    for (size_t n : sizes) {
        s.state.tensors.emplace_back(n);
        // Floats in [-1, 1) from a cheap generator seeded by the test's: a
        // tensor of 64 MiB fills fast even under ASan.
        uint64_t x = rng() | 1;
        for (float& v : s.state.tensors.back()) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            v = static_cast<float>(static_cast<int64_t>(x >> 39) - (int64_t{1} << 24)) * 0x1p-24f;
        }
    }
    return s;
}

std::vector<int32_t> random_tokens(std::mt19937_64& rng, size_t n) {
    std::vector<int32_t> t(n);
    for (auto& v : t) v = static_cast<int32_t>(rng() % 150000);
    return t;
}

void expect_same(const SessionSnapshot& a, const SessionSnapshot& b) {
    EXPECT_EQ(a.n_past(), b.n_past());
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.state.tokens, b.state.tokens);
    ASSERT_EQ(a.state.tensors.size(), b.state.tensors.size());
    for (size_t i = 0; i < a.state.tensors.size(); ++i)
        EXPECT_TRUE(a.state.tensors[i] == b.state.tensors[i]) << "tensor " << i;
}

std::string slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}
void spit(const std::string& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// Collects warnings for the scope's lifetime.
struct Warnings {
    std::mutex mu;
    std::vector<std::string> lines;
    LogSink previous;
    Warnings() {
        previous = set_log_sink([this](LogLevel level, std::string_view line) {
            std::lock_guard<std::mutex> lock(mu);
            if (level == LogLevel::warning) lines.emplace_back(line);
        });
    }
    ~Warnings() { set_log_sink(previous); }
    size_t count(const std::string& what) {
        std::lock_guard<std::mutex> lock(mu);
        size_t n = 0;
        for (const auto& l : lines) n += l.find(what) != std::string::npos;
        return n;
    }
};

TEST(SnapshotFile, RoundTripsBitForBitWithEitherCodec) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    for (SnapshotCodec codec : {SnapshotCodec::zstd, SnapshotCodec::lz4}) {
        // One tensor larger than a 64 MiB frame, so frames cross tensors.
        const size_t big = (codec == SnapshotCodec::zstd ? (66u << 20) / 4 + rng() % 1000 : 1 + rng() % 5000);
        const auto snap = random_snapshot(rng, random_tokens(rng, 1 + rng() % 300), {1 + rng() % 777, big, 3, 0, 129});
        const std::string path = dir.path + "/s.ds4kv";
        write_snapshot_file(path, dir.path + "/.tmp-1", snap, "model-a", codec);
        EXPECT_FALSE(fs::exists(dir.path + "/.tmp-1"));
        const SnapshotFileHeader h = read_snapshot_header(path);
        EXPECT_EQ(h.tokens, snap.tokens);
        EXPECT_EQ(h.model_identity, "model-a");
        expect_same(read_snapshot_file(path, "model-a"), snap);
        fs::remove(path);
    }
}

TEST(SnapshotFile, RefusesEveryTruncationCorruptionAndForeignModel) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    const auto snap = random_snapshot(rng, random_tokens(rng, 40), {500, 1000});
    const std::string path = dir.path + "/s.ds4kv";
    write_snapshot_file(path, dir.path + "/.tmp", snap, "model-a", SnapshotCodec::zstd);
    const std::string good = slurp(path);
    EXPECT_THROW(read_snapshot_file(path, "model-b"), Error);
    try {
        read_snapshot_file(path, "model-b");
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("another model file"), std::string::npos) << e.what();
    }
    for (int i = 0; i < 40; ++i) {
        const size_t cut = rng() % good.size();
        spit(path, good.substr(0, cut));
        EXPECT_THROW(read_snapshot_file(path, "model-a"), Error) << "cut at " << cut << " of " << good.size();
        EXPECT_THROW(read_snapshot_header(path), Error) << "cut at " << cut << " of " << good.size();
        std::string bad = good;
        const size_t at = rng() % good.size();
        bad[at] = static_cast<char>(bad[at] ^ (1 + rng() % 255));
        spit(path, bad);
        EXPECT_THROW(read_snapshot_file(path, "model-a"), Error) << "byte " << at << " flipped";
    }
    spit(path, good + "x");
    EXPECT_THROW(read_snapshot_file(path, "model-a"), Error);
}

// A coordinator's snapshot: its own tensors and each later stage's part.
SessionSnapshot gathered_snapshot(std::mt19937_64& rng, size_t n_tokens) {
    SessionSnapshot s = random_snapshot(rng, random_tokens(rng, n_tokens), {1 + rng() % 300, 64});
    const int stages = 1 + static_cast<int>(rng() % 3);
    int begin = 2;
    for (int i = 0; i < stages; ++i) {
        const SessionSnapshot part = random_snapshot(rng, {}, {1 + rng() % 500, 0, 1 + rng() % 40});
        const int end = begin + 1 + static_cast<int>(rng() % 3);
        s.state.route.push_back(RouteStatePart{begin, end, "model-" + std::to_string(rng() % 1000), part.state.tensors});
        begin = end;
    }
    return s;
}

void expect_same_route(const SessionSnapshot& a, const SessionSnapshot& b) {
    ASSERT_EQ(a.state.route.size(), b.state.route.size());
    for (size_t i = 0; i < a.state.route.size(); ++i) {
        const RouteStatePart &x = a.state.route[i], &y = b.state.route[i];
        EXPECT_EQ(x.begin, y.begin);
        EXPECT_EQ(x.end, y.end);
        EXPECT_EQ(x.model_id, y.model_id);
        EXPECT_TRUE(x.tensors == y.tensors) << "stage " << i;
    }
}

TEST(SnapshotFile, RoundTripsEveryStagesPartOfAGatheredSnapshot) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    for (SnapshotCodec codec : {SnapshotCodec::zstd, SnapshotCodec::lz4}) {
        const auto snap = gathered_snapshot(rng, 1 + rng() % 200);
        const std::string path = dir.path + "/g.ds4kv";
        write_snapshot_file(path, dir.path + "/.tmp-g", snap, "model-a", codec);
        const SnapshotFileHeader h = read_snapshot_header(path);
        EXPECT_EQ(h.version, 2u);
        ASSERT_EQ(h.parts.size(), snap.state.route.size());
        for (size_t i = 0; i < h.parts.size(); ++i) {
            EXPECT_EQ(h.parts[i].begin, snap.state.route[i].begin);
            EXPECT_EQ(h.parts[i].tensor_floats.size(), snap.state.route[i].tensors.size());
        }
        const SessionSnapshot back = read_snapshot_file(path, "model-a");
        expect_same(back, snap);
        expect_same_route(back, snap);
        EXPECT_EQ(back.bytes(), snap.bytes());
        fs::remove(path);
    }
}

TEST(SnapshotFile, RefusesEveryTruncationOfAGatheredFile) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    const auto snap = gathered_snapshot(rng, 1 + rng() % 30);
    const std::string path = dir.path + "/g.ds4kv";
    write_snapshot_file(path, dir.path + "/.tmp", snap, "model-a", SnapshotCodec::lz4);
    const std::string good = slurp(path);
    for (size_t cut = 0; cut < good.size(); ++cut) {  // every one: the file is a few KiB
        spit(path, good.substr(0, cut));
        EXPECT_THROW(read_snapshot_file(path, "model-a"), Error) << "cut at " << cut << " of " << good.size();
    }
    for (int i = 0; i < 40; ++i) {
        std::string bad = good;
        const size_t at = rng() % good.size();
        bad[at] = static_cast<char>(bad[at] ^ (1 + rng() % 255));
        spit(path, bad);
        EXPECT_THROW(read_snapshot_file(path, "model-a"), Error) << "byte " << at << " flipped";
    }
}

TEST(SnapshotFile, AVersion1FileStillLoadsWithoutStageParts) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    const auto snap = random_snapshot(rng, random_tokens(rng, 1 + rng() % 50), {1 + rng() % 400, 9});
    const std::string path = dir.path + "/v.ds4kv";
    write_snapshot_file(path, dir.path + "/.tmp", snap, "model-a", SnapshotCodec::zstd);
    const std::string v2 = slurp(path);
    // Version 1's header is version 2's without the stage count (the u64
    // before the header hash), under its own hash.
    const size_t hb = static_cast<size_t>(read_snapshot_header(path).header_bytes);
    std::string h = v2.substr(0, hb - 16);
    const uint32_t one = 1;
    std::memcpy(h.data() + 8, &one, sizeof one);
    const uint64_t hash = XXH3_64bits(h.data(), h.size());
    spit(path, h + std::string(reinterpret_cast<const char*>(&hash), sizeof hash) + v2.substr(hb));
    EXPECT_EQ(read_snapshot_header(path).version, 1u);
    const SessionSnapshot back = read_snapshot_file(path, "model-a");
    expect_same(back, snap);
    EXPECT_TRUE(back.state.route.empty());
}

SnapshotDiskOptions options(const std::string& dir, uint64_t bytes) {
    SnapshotDiskOptions o;
    o.dir = dir;
    o.max_bytes = bytes;
    o.model_identity = "model-a";
    return o;
}

std::vector<int32_t> prefix(const std::vector<int32_t>& t, size_t n) { return {t.begin(), t.begin() + n}; }

TEST(SnapshotDisk, FindsTheLongestStoredPrefixAcrossARestart) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    const auto a = random_tokens(rng, 60), b = random_tokens(rng, 60);
    const auto s10 = random_snapshot(rng, prefix(a, 10), {100, 7});
    const auto s20 = random_snapshot(rng, prefix(a, 20), {100, 7});
    const auto t15 = random_snapshot(rng, prefix(b, 15), {100, 7});
    {
        SnapshotDisk disk(options(dir.path, 1 << 20));
        disk.store(s10);
        disk.store(s20);
        disk.store(t15);
        disk.store(s20);  // the same tokens again: one file
        disk.flush();
        EXPECT_EQ(disk.stats().files, 3u);
        EXPECT_EQ(disk.stats().stores, 3u);
    }
    SnapshotDisk disk(options(dir.path, 1 << 20));  // a restarted server
    EXPECT_EQ(disk.stats().files, 3u);
    auto got = disk.load(prefix(a, 25), 0);
    ASSERT_TRUE(got.has_value());
    expect_same(*got, s20);
    got = disk.load(prefix(a, 20), 0);  // the whole prompt is never a hit: its last token needs logits
    ASSERT_TRUE(got.has_value());
    expect_same(*got, s10);
    EXPECT_FALSE(disk.load(prefix(a, 25), 20).has_value());  // nothing longer than what the caller has
    got = disk.load(prefix(b, 40), 3);
    ASSERT_TRUE(got.has_value());
    expect_same(*got, t15);
    auto other = a;
    other[5] ^= 1;
    EXPECT_FALSE(disk.load(other, 0).has_value());
    EXPECT_EQ(disk.stats().hits, 3u);
    EXPECT_EQ(disk.stats().misses, 2u);
}

TEST(SnapshotDisk, StaysWithinItsBudgetByLeastRecentUse) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    std::vector<std::vector<int32_t>> toks;
    std::vector<SessionSnapshot> snaps;
    for (int i = 0; i < 4; ++i) {
        toks.push_back(random_tokens(rng, 30));
        snaps.push_back(random_snapshot(rng, prefix(toks.back(), 20), {5000}));
    }
    // Room for two files of ~20 KB (raw bound) and a little more.
    const uint64_t budget = snaps[0].bytes() * 2 + snaps[0].bytes() / 2;
    SnapshotDisk disk(options(dir.path, budget));
    disk.store(snaps[0]);
    disk.store(snaps[1]);
    disk.flush();
    ASSERT_TRUE(disk.load(toks[0], 0).has_value());  // 0 is now the most recent
    disk.store(snaps[2]);
    disk.flush();
    EXPECT_LE(disk.stats().bytes, budget);
    EXPECT_TRUE(disk.load(toks[0], 0).has_value());
    EXPECT_FALSE(disk.load(toks[1], 0).has_value()) << "the least recently used file stayed";
    EXPECT_TRUE(disk.load(toks[2], 0).has_value());
    EXPECT_GE(disk.stats().evictions, 1u);
    size_t on_disk = 0;
    for (const auto& e : fs::directory_iterator(dir.path)) on_disk += e.path().extension() == ".ds4kv";
    EXPECT_EQ(on_disk, disk.stats().files) << [&] { std::string l; for (const auto& e : fs::directory_iterator(dir.path)) l += e.path().filename().string() + " "; return l; }();
    // Larger than the whole budget: not written at all.
    disk.store(random_snapshot(rng, prefix(toks[3], 20), {static_cast<size_t>(budget)}));
    disk.flush();
    EXPECT_FALSE(disk.load(toks[3], 0).has_value());
}

TEST(SnapshotDisk, IgnoresBadFilesAndRemovesAKilledWritersLeftovers) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    const auto ta = random_tokens(rng, 50), tb = random_tokens(rng, 50), tc = random_tokens(rng, 50);
    {
        SnapshotDisk disk(options(dir.path, 1 << 20));
        disk.store(random_snapshot(rng, prefix(ta, 30), {300}));
        disk.store(random_snapshot(rng, prefix(tb, 30), {300}));
        disk.store(random_snapshot(rng, prefix(tc, 30), {300}));
        disk.flush();
    }
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(dir.path)) files.push_back(e.path().string());
    ASSERT_EQ(files.size(), 3u);
    std::sort(files.begin(), files.end());
    // One truncated, one another model's (its header rewritten by a writer
    // for model-b under the same name), one left good.
    const std::string whole = slurp(files[0]);
    spit(files[0], whole.substr(0, whole.size() / 2 + rng() % (whole.size() / 2)));
    const SnapshotFileHeader h = read_snapshot_header(files[1]);
    SessionSnapshot foreign = read_snapshot_file(files[1], "model-a");
    fs::remove(files[1]);
    write_snapshot_file(files[1], dir.path + "/.x", foreign, "model-b", SnapshotCodec::lz4);
    // A killed writer's temporary file (its process is gone) and a live one's.
    const pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, nullptr, 0);
    const std::string dead = dir.path + "/.tmp-" + std::to_string(child) + "-1.ds4kv";
    const std::string live = dir.path + "/.tmp-" + std::to_string(getpid()) + "-99.ds4kv";
    spit(dead, "partial");
    spit(live, "partial");

    Warnings w;
    SnapshotDisk disk(options(dir.path, 1 << 20));
    EXPECT_EQ(disk.stats().files, 1u);
    EXPECT_EQ(w.count("ignoring"), 2u);
    EXPECT_EQ(w.count("is truncated"), 1u);
    EXPECT_EQ(w.count("another model"), 1u);
    EXPECT_FALSE(fs::exists(dead));
    EXPECT_TRUE(fs::exists(live));
    size_t hits = 0;
    for (const auto* t : {&ta, &tb, &tc}) hits += disk.load(*t, 0).has_value();
    EXPECT_EQ(hits, 1u);
    (void)h;
}

TEST(SnapshotDisk, DropsAFileWhosePayloadWentBad) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    const auto t = random_tokens(rng, 50);
    const auto short_one = random_snapshot(rng, prefix(t, 10), {400});
    {
        SnapshotDisk disk(options(dir.path, 1 << 20));
        disk.store(short_one);
        disk.store(random_snapshot(rng, prefix(t, 30), {400}));
        disk.flush();
    }
    std::string longest;
    for (const auto& e : fs::directory_iterator(dir.path))
        if (e.path().filename().string().find("-30.ds4kv") != std::string::npos) longest = e.path().string();
    ASSERT_FALSE(longest.empty());
    std::string bytes = slurp(longest);
    const uint64_t payload_at = read_snapshot_header(longest).header_bytes;
    const size_t at = payload_at + 8 + rng() % (bytes.size() - payload_at - 8 - 24);
    bytes[at] = static_cast<char>(bytes[at] ^ 0x5a);
    spit(longest, bytes);

    Warnings w;
    SnapshotDisk disk(options(dir.path, 1 << 20));
    EXPECT_EQ(disk.stats().files, 2u);  // its header is intact
    auto got = disk.load(t, 0);
    ASSERT_TRUE(got.has_value());
    expect_same(*got, short_one);  // the next shorter prefix, after the bad one was dropped
    EXPECT_EQ(disk.stats().load_failures, 1u);
    EXPECT_EQ(disk.stats().files, 1u);
    EXPECT_FALSE(fs::exists(longest));
    EXPECT_EQ(w.count("KV cache"), 1u);
}

TEST(SnapshotDisk, RefusesADirectoryItCannotUse) {
    TempDir dir;
    spit(dir.path + "/file", "x");
    EXPECT_THROW(SnapshotDisk(options(dir.path + "/file", 1 << 20)), Error);
}

}  // namespace
}  // namespace ds4

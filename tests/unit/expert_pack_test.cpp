// Expert packs (experts/expert_pack.h) on real files: a pack written for a
// fresh random model of each family opens, matches the model's routed
// experts and every record passes its checksum; then hundreds of random
// damages to copies of it (a byte of the header, of the trailer or of a
// record changed, the file cut short or grown, the version changed), each
// refused with one sentence naming the file, or, inside a record, caught by
// that record's checksum alone; a pack of another model file (another
// seed, another family) and one of a layer slice are refused by
// check_matches.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "common/error.h"
#include "experts/expert_pack.h"
#include "experts/expert_pack_writer.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "mapping/model_identity.h"
#include "mapping/model_map.h"
#include "mapping/shard.h"
#include "models/family.h"
#include "support/test_seed.h"
#include "synth/synth_family.h"

namespace ds4 {
namespace {

namespace fs = std::filesystem;

struct Dir {
    Dir() {
        std::string t = (fs::temp_directory_path() / "ds4-pack-XXXXXX").string();
        if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp");
        path = t;
    }
    ~Dir() { fs::remove_all(path); }
    fs::path path;
};

fs::path synth(const fs::path& dir, const std::string& arch, uint64_t seed) {
    SynthRequest r;
    r.preset = "micro";
    r.tokenizer = false;
    r.seed = seed;
    if (arch == "deepseek4") r.quant = "f32";
    r.out = (dir / (arch + "-" + std::to_string(seed) + ".gguf")).string();
    synth_family(arch).synth(r);
    return r.out;
}

// The routed experts as the family binds them, without their bytes.
std::vector<RoutedExperts> routed(const GgufFile& file) {
    MapSelection sel;
    sel.routed_experts = false;
    auto map = ModelMap::build(file, sel);
    LoadOptions lo;
    lo.resident_experts = false;
    return load_model(file, *map, lo)->routed_experts();
}

std::vector<uint8_t> slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}
void spit(const fs::path& p, const std::vector<uint8_t>& b) {
    std::ofstream(p, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// Throws ds4::Error with one sentence that names `path`.
::testing::AssertionResult refused(const std::function<void()>& f, const std::string& path, const std::string& needle = "") {
    try {
        f();
    } catch (const Error& e) {
        const std::string m = e.what();
        if (m.find(path) == std::string::npos) return ::testing::AssertionFailure() << "does not name the file: " << m;
        if (m.find('\n') != std::string::npos || m.back() != '.') return ::testing::AssertionFailure() << "not one sentence: " << m;
        if (m.find(needle) == std::string::npos) return ::testing::AssertionFailure() << "no '" << needle << "': " << m;
        return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "accepted";
}

class ExpertPackFiles : public ::testing::TestWithParam<const char*> {};

TEST_P(ExpertPackFiles, WholePackOpensAndMatches) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    Dir dir;
    const fs::path model = synth(dir.path, GetParam(), seed), pack = dir.path / "m.pack";
    const auto file = GgufFile::open(model.string());
    write_expert_pack(*file, model_identity(*file), pack.string());
    const ExpertPack p = ExpertPack::open(pack.string());
    const std::vector<RoutedExperts> blocks = routed(*file);
    ASSERT_FALSE(blocks.empty());
    p.check_matches(model_identity(*file), blocks);
    const std::vector<uint8_t> bytes = slurp(pack);
    for (const PackBlock& b : p.layout().blocks)
        for (int64_t e = 0; e < b.n_expert; ++e) EXPECT_TRUE(p.record_intact(b, e, bytes.data() + b.record_offset(e)));
    // Another seed's model, another family's: another model file.
    const fs::path other = synth(dir.path, GetParam(), seed + 1);
    const auto other_file = GgufFile::open(other.string());
    EXPECT_TRUE(refused([&] { p.check_matches(model_identity(*other_file), routed(*other_file)); }, pack.string(),
                        "was made from another model file"));
    const std::string family = std::string(GetParam()) == "qwen3moe" ? "deepseek4" : "qwen3moe";
    const fs::path foreign = synth(dir.path, family, seed);
    const auto foreign_file = GgufFile::open(foreign.string());
    EXPECT_TRUE(refused([&] { p.check_matches(model_identity(*foreign_file), routed(*foreign_file)); }, pack.string(),
                        "was made from another model file"));
    // A pack of a layer slice (the shard keeps the source's identity) lacks
    // the other blocks.
    const fs::path shard = dir.path / "shard.gguf", shard_pack = dir.path / "shard.pack";
    const int last = blocks.back().layer;
    write_shard(*file, LayerRange{0, last}, model_identity(*file), shard.string());
    const auto shard_file = GgufFile::open(shard.string());
    write_expert_pack(*shard_file, model_identity(*shard_file), shard_pack.string());
    const ExpertPack sp = ExpertPack::open(shard_pack.string());
    EXPECT_TRUE(refused([&] { sp.check_matches(model_identity(*file), blocks); }, shard_pack.string(),
                        "has no block " + std::to_string(last)));
}

TEST_P(ExpertPackFiles, RandomDamageIsRefused) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    Dir dir;
    const fs::path model = synth(dir.path, GetParam(), rng()), pack = dir.path / "m.pack", bad = dir.path / "bad.pack";
    const auto file = GgufFile::open(model.string());
    const std::string identity = model_identity(*file);
    const std::vector<RoutedExperts> blocks = routed(*file);
    write_expert_pack(*file, identity, pack.string());
    const std::vector<uint8_t> good = slurp(pack);
    const PackLayout layout = ExpertPack::open(pack.string()).layout();
    const uint64_t records_end = layout.records_end;
    auto pick = [&](uint64_t lo, uint64_t hi) { return lo + rng() % (hi - lo); };
    int header = 0, trailer = 0, record = 0, cut = 0, grown = 0;
    for (int i = 0; i < 400; ++i) {
        std::vector<uint8_t> b = good;
        const int kind = int(rng() % 5);
        uint64_t at = 0;
        switch (kind) {
            case 0: at = pick(0, layout.header_bytes); ++header; break;
            case 1: at = pick(records_end, b.size()); ++trailer; break;
            case 2: at = pick(layout.header_bytes, records_end); ++record; break;
            case 3: b.resize(pick(0, b.size())); ++cut; break;
            case 4: b.resize(b.size() + pick(1, 9000), uint8_t(rng())); ++grown; break;
        }
        if (kind <= 2) b[at] ^= uint8_t(1 + rng() % 255);  // always a change
        spit(bad, b);
        SCOPED_TRACE("damage " + std::to_string(kind) + " at " + std::to_string(at) + ", size " + std::to_string(b.size()));
        if (kind != 2) {
            ASSERT_TRUE(refused([&] { ExpertPack::open(bad.string()); }, bad.string()));
            continue;
        }
        // Inside a record: the pack still opens (nothing reads every record
        // at load) and matches the model; that record alone fails its checksum.
        const ExpertPack p = ExpertPack::open(bad.string());
        p.check_matches(identity, blocks);
        int failing = 0;
        for (const PackBlock& blk : p.layout().blocks)
            for (int64_t e = 0; e < blk.n_expert; ++e) {
                const uint64_t r = blk.record_offset(e);
                const bool hit = at >= r && at < r + blk.record_bytes;
                EXPECT_EQ(p.record_intact(blk, e, b.data() + r), !hit) << "block " << blk.layer << " expert " << e;
                failing += !p.record_intact(blk, e, b.data() + r);
            }
        ASSERT_EQ(failing, 1);
    }
    EXPECT_GT(header + trailer + record + cut + grown, 0);
    // The version, the magic, and a file that is not a pack at all.
    std::vector<uint8_t> b = good;
    b[8] = 2;
    spit(bad, b);
    EXPECT_TRUE(refused([&] { ExpertPack::open(bad.string()); }, bad.string(), "format version 2; this ds4 reads version 1"));
    EXPECT_TRUE(refused([&] { ExpertPack::open(model.string()); }, model.string(), "is not an expert pack"));
    spit(bad, {});
    EXPECT_TRUE(refused([&] { ExpertPack::open(bad.string()); }, bad.string(), "is not an expert pack"));
    b = good;
    b.resize(records_end + 5);
    spit(bad, b);
    EXPECT_TRUE(refused([&] { ExpertPack::open(bad.string()); }, bad.string(), "is cut short"));
}

INSTANTIATE_TEST_SUITE_P(Families, ExpertPackFiles, ::testing::Values("qwen3moe", "deepseek4"));

// A GGUF without routed experts has nothing to pack; a block with some of
// gate, up and down but not all is refused, naming the block. No file is left.
TEST(ExpertPackWriter, RefusesFilesWithoutWholeExpertBlocks) {
    Dir dir;
    const fs::path dense = dir.path / "dense.gguf", half = dir.path / "half.gguf", out = dir.path / "x.pack";
    auto bytes = [](size_t n) { return std::vector<uint8_t>(n, 7); };
    GgufWriter a;
    a.add_tensor_bytes("blk.0.ffn_up.weight", GgmlType::F32, {8, 4}, bytes(8 * 4 * 4));
    a.write(dense.string());
    GgufWriter b;
    b.add_tensor_bytes("blk.3.ffn_up_exps.weight", GgmlType::F32, {8, 4, 2}, bytes(8 * 4 * 2 * 4));
    b.add_tensor_bytes("blk.3.ffn_down_exps.weight", GgmlType::F32, {4, 8, 2}, bytes(8 * 4 * 2 * 4));
    b.write(half.string());
    const auto d = GgufFile::open(dense.string()), h = GgufFile::open(half.string());
    EXPECT_TRUE(refused([&] { write_expert_pack(*d, model_identity(*d), out.string()); }, dense.string(),
                        "has no routed experts"));
    EXPECT_TRUE(refused([&] { write_expert_pack(*h, model_identity(*h), out.string()); }, half.string(),
                        "block 3 lacks one of ffn_gate_exps"));
    EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace ds4

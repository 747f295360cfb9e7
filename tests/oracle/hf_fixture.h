// Committed transformers fixtures (tests/fixtures/hf_*): a GGUF, token ids,
// float32 logits of every position and a JSON recording how they were made,
// with the sha256 of each file. make_fixtures.py next to each set wrote all
// of them on a machine with transformers; this machine has none, so the
// files are the reference and are checked before use: an edited or truncated
// fixture fails loudly instead of becoming a new "expected" value.
#pragma once

#include <array>
#include <nlohmann/json.hpp>

#include "oracle_harness.h"

namespace ds4::oracle {

inline std::vector<int32_t> read_token_ids(const fs::path& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path.string());
    std::vector<int32_t> ids;
    for (int64_t v; in >> v;) ids.push_back(int32_t(v));
    if (ids.empty()) throw std::runtime_error(path.string() + " holds no token ids");
    return ids;
}

struct HfFixture {
    fs::path model;
    std::vector<int32_t> ids;
    size_t n_vocab = 0;
    Logits hf;  // every position of the full token list
    nlohmann::json meta;  // NAME.json
};

// sha256 of a file, by coreutils' sha256sum (not code of ours).
inline std::string sha256_of(const fs::path& path) {
    const CommandResult r = run_checked({"sha256sum", "--", path.string()});
    return r.output.substr(0, r.output.find(' '));
}

inline nlohmann::json read_fixture_json(const fs::path& dir, const std::string& name) {
    const fs::path p = dir / (name + ".json");
    std::ifstream in(p);
    if (!in)
        throw std::runtime_error("cannot read " + p.string() +
                                 ": the fixture is missing (make_fixtures.py in that folder writes it)");
    return nlohmann::json::parse(in);
}

// Throws naming the first file of fixture `name` (in `dir`) whose sha256
// differs from the one its JSON records, or that the JSON does not list.
inline void verify_fixture_sha256(const fs::path& dir, const std::string& name) {
    const auto recorded = read_fixture_json(dir, name).at("sha256");
    for (const char* ext : {".gguf.bin", ".ids", ".logits"}) {
        const std::string file = name + ext;
        if (!recorded.contains(file)) throw std::runtime_error(name + ".json records no sha256 for " + file);
        const std::string want = recorded.at(file).get<std::string>(), got = sha256_of(dir / file);
        if (got != want)
            throw std::runtime_error("fixture " + (dir / file).string() + " has sha256 " + got + ", its JSON records " +
                                     want + ": regenerate it with make_fixtures.py, do not edit it");
    }
}

inline HfFixture load_hf_fixture(const fs::path& dir, const std::string& name) {
    verify_fixture_sha256(dir, name);
    HfFixture f;
    f.meta = read_fixture_json(dir, name);
    f.model = dir / (name + ".gguf.bin");
    f.ids = read_token_ids(dir / (name + ".ids"));
    f.n_vocab = size_t(read_gguf_summary(f.model).n_vocab);
    f.hf = read_logits(dir / (name + ".logits"), f.ids.size(), f.n_vocab);
    return f;
}

// A causal model's logits for a prefix are the first rows of the full run.
inline Logits first_rows(const Logits& l, size_t n) {
    return Logits{n, l.n_vocab, std::vector<float>(l.values.begin(), l.values.begin() + ptrdiff_t(n * l.n_vocab))};
}

inline ::testing::AssertionResult same_argmax(const Logits& ours, const Logits& ref) {
    for (size_t i = 0; i < ref.n_tokens; ++i)
        if (ours.argmax(i) != ref.argmax(i))
            return ::testing::AssertionFailure() << "argmax differs at position " << i << ": " << ours.argmax(i)
                                                 << " vs transformers " << ref.argmax(i);
    return ::testing::AssertionSuccess();
}

// Flips one bit of one random fixture file (a copy in `scratch`) and expects
// the integrity check to refuse it.
inline void expect_integrity_check_sees_one_changed_byte(const fs::path& dir, const std::string& name,
                                                         const fs::path& scratch, std::mt19937_64& rng) {
    EXPECT_NO_THROW(verify_fixture_sha256(dir, name));
    for (const char* ext : {".json", ".gguf.bin", ".ids", ".logits"}) fs::copy_file(dir / (name + ext), scratch / (name + ext));
    const char* victim = std::array<const char*, 3>{".gguf.bin", ".ids", ".logits"}[rng() % 3];
    const fs::path p = scratch / (name + victim);
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    const auto at = std::streamoff(rng() % fs::file_size(p));
    f.seekg(at);
    const char c = char(f.get() ^ 0x01);
    f.seekp(at);
    f.put(c);
    f.close();
    EXPECT_THROW(verify_fixture_sha256(scratch, name), std::runtime_error) << "byte " << at << " of " << p;
}

// A test over one fixture (the parameter, its name) with a fresh seed, named
// in every failure, and a temporary folder.
class HfFixtureTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        seed_ = fresh_seed();
        rng_.seed(seed_);
        trace_.emplace(__FILE__, __LINE__, ds4::test::seed_note(seed_) + ", fixture " + GetParam());
    }

    TempDir dir_;
    uint64_t seed_ = 0;
    std::mt19937_64 rng_;
    std::optional<::testing::ScopedTrace> trace_;
};

}  // namespace ds4::oracle

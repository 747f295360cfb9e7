// Corrupt model files of every family, run through the real `ds4` program
// (`ds4 -m BAD --token-ids F --dump-logits O`): a tensor missing, of a wrong
// shape (every dimension of every tensor) or type; hyper-parameters missing,
// zero, negative, huge, NaN, or disagreeing with each other or with the
// tensors; NaN and infinities in weights (found by --check-tensors only).
// Each must end the run with exit status 1 and exactly one stderr line
// naming the file and the tensor or metadata key, never a crash or a
// silently wrong model. The models are `ds4-gguf synth --preset micro`
// files, read back and rewritten with one change each; the unchanged
// rewrite, and changes a loader must accept, have to run (exit 0), so every
// check here can fail. DS4_TEST_SEED fixes the weights and the random wrong
// sizes; the seed is printed with every failure.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "quant/quant.h"
#include "support/test_seed.h"

extern char** environ;

namespace ds4 {
namespace {

namespace fs = std::filesystem;

uint64_t test_seed() { return ds4::test::process_seed(); }

std::string seed_note() {
    return ds4::test::seed_note(test_seed());
}

fs::path program(const std::string& name) {
    const char* dir = std::getenv("DS4_BIN");
    return fs::path(dir && *dir ? dir : DS4_BINARY_DIR) / name;
}

struct ProgramRun {
    int status = -1;  // exit status; -1 when killed by a signal
    int signal = 0;
    std::vector<std::string> err_lines;
    std::string err;
};

// Runs argv with stdin and stdout on /dev/null and stderr into err_file.
ProgramRun run_program(const std::vector<std::string>& argv, const fs::path& err_file) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = 0;
    ProgramRun r;
    const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        r.err = "cannot start " + argv[0] + ": " + std::strerror(rc);
        return r;
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    if (WIFEXITED(ws)) r.status = WEXITSTATUS(ws);
    if (WIFSIGNALED(ws)) r.signal = WTERMSIG(ws);
    std::ifstream in(err_file);
    std::stringstream ss;
    ss << in.rdbuf();
    r.err = ss.str();
    std::istringstream lines(r.err);
    for (std::string l; std::getline(lines, l);) r.err_lines.push_back(l);
    return r;
}

// ---- a GGUF file in memory, to change one thing and write it again ----------

struct EditableTensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> bytes;
};

size_t tensor_bytes(GgmlType type, const std::vector<int64_t>& ne) {
    size_t n = ggml_row_bytes(type, ne[0]);
    for (size_t d = 1; d < ne.size(); ++d) n *= static_cast<size_t>(ne[d]);
    return n;
}

struct EditableGguf {
    std::vector<std::pair<std::string, GgufValue>> kv;
    std::vector<EditableTensor> tensors;

    static EditableGguf read(const fs::path& path) {
        const auto f = GgufFile::open(path.string());
        std::ifstream in(path, std::ios::binary);
        const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        EditableGguf g;
        g.kv = f->metadata();
        for (const auto& t : f->tensors())
            g.tensors.push_back({t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                                 std::vector<uint8_t>(bytes.begin() + static_cast<ptrdiff_t>(t.file_offset),
                                                      bytes.begin() + static_cast<ptrdiff_t>(t.file_offset + t.nbytes))});
        return g;
    }

    void write(const fs::path& path) const {
        GgufWriter w;
        for (const auto& [k, v] : kv) w.set(k, v);
        for (const auto& t : tensors) w.add_tensor_bytes(t.name, t.type, t.ne, t.bytes);
        w.write(path.string());
    }

    EditableTensor& tensor(const std::string& name) {
        for (auto& t : tensors)
            if (t.name == name) return t;
        throw std::runtime_error("test model has no tensor " + name);
    }
    const GgufValue& value(const std::string& key) const {
        for (const auto& [k, v] : kv)
            if (k == key) return v;
        throw std::runtime_error("test model has no key " + key);
    }
    void set(const std::string& key, GgufValue v) {
        for (auto& [k, old] : kv)
            if (k == key) {
                old = std::move(v);
                return;
            }
        kv.emplace_back(key, std::move(v));
    }
    void erase(const std::string& key) {
        std::erase_if(kv, [&](const auto& e) { return e.first == key; });
    }
    void drop(const std::string& name) {
        std::erase_if(tensors, [&](const EditableTensor& t) { return t.name == name; });
    }
    void add(const std::string& name, GgmlType type, std::vector<int64_t> ne, std::mt19937_64& rng);
    // New shape (and bytes, random but valid: finite floats, expert ids 0).
    void reshape(const std::string& name, std::vector<int64_t> ne, std::mt19937_64& rng);
};

std::vector<uint8_t> random_bytes(GgmlType type, const std::vector<int64_t>& ne, std::mt19937_64& rng) {
    std::vector<uint8_t> b(tensor_bytes(type, ne));
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    if (type == GgmlType::F32)
        for (size_t i = 0; i + 4 <= b.size(); i += 4) {
            const float x = u(rng);
            std::memcpy(&b[i], &x, 4);
        }
    if (type == GgmlType::F16)
        for (size_t i = 0; i + 2 <= b.size(); i += 2) {
            const uint16_t h = fp32_to_fp16(u(rng));
            std::memcpy(&b[i], &h, 2);
        }
    return b;  // integer tables stay 0: a valid expert id
}

void EditableGguf::add(const std::string& name, GgmlType type, std::vector<int64_t> ne, std::mt19937_64& rng) {
    tensors.push_back({name, type, ne, random_bytes(type, ne, rng)});
}

void EditableGguf::reshape(const std::string& name, std::vector<int64_t> ne, std::mt19937_64& rng) {
    EditableTensor& t = tensor(name);
    t.ne = std::move(ne);
    t.bytes = random_bytes(t.type, t.ne, rng);
}

std::string shape_text(const std::vector<int64_t>& ne) {
    std::string s;
    for (int64_t n : ne) s += (s.empty() ? "" : ",") + std::to_string(n);
    return "[" + s + "]";
}

// ---- the families ---------------------------------------------------------------

struct Family {
    std::string arch;
    std::vector<std::string> optional_tensors;  // dropping them is legal
    std::vector<std::string> required_keys;     // "<arch>." is prepended
    std::vector<std::string> counts;            // widths and counts: 1 or more when present
    std::vector<std::string> zero_allowed;      // counts where 0 is legal (huge and negative are not)
    std::vector<std::string> positive_numbers;  // floats that must be > 0
    std::vector<std::string> non_negative_numbers;
};

Family qwen3moe() {
    Family f;
    f.arch = "qwen3moe";
    f.optional_tensors = {"output.weight"};  // tied embeddings
    f.required_keys = {"embedding_length", "block_count", "attention.head_count", "expert_count", "expert_used_count"};
    f.counts = {"embedding_length",        "block_count",          "attention.head_count", "attention.head_count_kv",
                "attention.key_length",    "attention.value_length", "expert_count",       "expert_used_count",
                "rope.dimension_count",    "expert_feed_forward_length", "vocab_size"};
    f.zero_allowed = {"context_length", "rope.scaling.original_context_length"};
    f.positive_numbers = {"rope.freq_base", "rope.scaling.attn_factor"};
    f.non_negative_numbers = {"attention.layer_norm_rms_epsilon", "expert_weights_scale", "rope.scaling.factor"};
    return f;
}

Family deepseek4() {
    Family f;
    f.arch = "deepseek4";
    f.required_keys = {"embedding_length",
                       "block_count",
                       "attention.head_count",
                       "attention.key_length",
                       "attention.q_lora_rank",
                       "attention.sliding_window",
                       "expert_count",
                       "expert_used_count",
                       "expert_shared_count",
                       "attention.indexer.head_count",
                       "attention.indexer.key_length",
                       "attention.indexer.top_k",
                       "attention.output_group_count",
                       "attention.output_lora_rank",
                       "hyper_connection.count",
                       "hyper_connection.sinkhorn_iterations",
                       "attention.compress_ratios",
                       "expert_gating_func"};
    f.counts = {"embedding_length",           "block_count",
                "attention.head_count",       "attention.key_length",
                "attention.value_length",     "rope.dimension_count",
                "attention.q_lora_rank",      "attention.sliding_window",
                "expert_count",               "expert_used_count",
                "expert_shared_count",        "attention.indexer.head_count",
                "attention.indexer.key_length", "attention.indexer.top_k",
                "attention.output_group_count", "attention.output_lora_rank",
                "hyper_connection.count",     "hyper_connection.sinkhorn_iterations",
                "expert_feed_forward_length", "vocab_size"};
    f.zero_allowed = {"context_length", "hash_layer_count", "nextn_predict_layers",
                      "rope.scaling.original_context_length"};
    f.positive_numbers = {"rope.freq_base", "attention.compress_rope_freq_base", "rope.scaling.attn_factor"};
    f.non_negative_numbers = {"attention.layer_norm_rms_epsilon", "expert_weights_scale", "hyper_connection.epsilon",
                              "rope.scaling.factor"};
    return f;
}

// micro: block 0 dense with its own indexer, block 1 MoE (4 experts in 2
// groups) reusing block 0's indexer, so block 1's indexer tensors, like the
// expert bias, are optional.
Family glm_dsa() {
    Family f;
    f.arch = "glm-dsa";
    f.optional_tensors = {"output.weight",
                          "blk.1.exp_probs_b.bias",
                          "blk.1.indexer.attn_q_b.weight",
                          "blk.1.indexer.attn_k.weight",
                          "blk.1.indexer.k_norm.weight",
                          "blk.1.indexer.k_norm.bias",
                          "blk.1.indexer.proj.weight"};
    f.required_keys = {"embedding_length",           "block_count",
                       "attention.head_count",       "attention.key_length_mla",
                       "attention.value_length_mla", "attention.q_lora_rank",
                       "attention.kv_lora_rank",     "feed_forward_length",
                       "expert_feed_forward_length", "expert_count",
                       "expert_used_count",          "expert_shared_count",
                       "attention.indexer.head_count", "attention.indexer.key_length",
                       "attention.indexer.top_k"};
    f.counts = {"embedding_length",           "block_count",
                "attention.head_count",       "attention.key_length",
                "attention.key_length_mla",   "attention.value_length_mla",
                "attention.q_lora_rank",      "attention.kv_lora_rank",
                "rope.dimension_count",       "feed_forward_length",
                "expert_feed_forward_length", "expert_count",
                "expert_used_count",          "expert_shared_count",
                "attention.indexer.head_count", "attention.indexer.key_length",
                "attention.indexer.top_k",    "vocab_size"};
    f.zero_allowed = {"context_length",     "leading_dense_block_count", "nextn_predict_layers",
                      "expert_group_count", "expert_group_used_count",   "expert_gating_func",
                      "rope.scaling.original_context_length"};
    f.positive_numbers = {"rope.freq_base", "rope.scaling.attn_factor"};
    f.non_negative_numbers = {"attention.layer_norm_rms_epsilon", "expert_weights_scale", "rope.scaling.factor"};
    return f;
}

void PrintTo(const Family& f, std::ostream* os) { *os << f.arch; }

// A test name for the family ("glm-dsa" -> "glm_dsa": gtest takes no dashes).
std::string param_name(const Family& f) {
    std::string n = f.arch;
    std::replace(n.begin(), n.end(), '-', '_');
    return n;
}

// The micro model of a family, synthesized once per test program.
const EditableGguf& micro_model(const std::string& arch, const fs::path& dir) {
    static std::map<std::string, EditableGguf> cache;
    if (auto it = cache.find(arch); it != cache.end()) return it->second;
    const fs::path out = dir / (arch + "-micro.gguf");
    const ProgramRun r =
        run_program({program("ds4-gguf").string(), "synth", "--arch", arch, "--preset", "micro", "--no-tokenizer",
                     "--seed", std::to_string(test_seed()), "--out", out.string()},
                    dir / "synth.err");
    if (r.status != 0) throw std::runtime_error("ds4-gguf synth failed: " + r.err);
    return cache.emplace(arch, EditableGguf::read(out)).first->second;
}

class CorruptModel : public ::testing::TestWithParam<Family> {
protected:
    void SetUp() override {
        std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
        std::replace(test.begin(), test.end(), '/', '_');  // "Name/qwen3moe"
        dir_ = fs::temp_directory_path() / ("ds4_corrupt_" + std::to_string(::getpid()) + "_" + test);
        fs::remove_all(dir_);
        fs::create_directories(dir_);
        model_ = dir_ / "bad.gguf";
        ids_ = dir_ / "ids.txt";
        std::ofstream ids(ids_);
        for (int t = 0; t < 16; ++t) ids << t << " ";  // every token of the micro vocabulary
        rng_.seed(test_seed() ^ std::hash<std::string>{}(GetParam().arch));
    }
    void TearDown() override { fs::remove_all(dir_); }

    const Family& family() const { return GetParam(); }
    std::string key(const std::string& k) const { return family().arch + "." + k; }
    EditableGguf micro() { return micro_model(family().arch, dir_); }

    ProgramRun run(const EditableGguf& g, const std::vector<std::string>& extra = {}) {
        g.write(model_);
        std::vector<std::string> argv = {program("ds4").string(), "-m", model_.string(), "--token-ids", ids_.string(),
                                         "--dump-logits", (dir_ / "logits.bin").string(), "-t", "2"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        return run_program(argv, dir_ / "ds4.err");
    }

    // The change `what` must fail the load with one sentence naming the
    // file and every needle.
    void expect_rejected(const EditableGguf& g, const std::string& what, const std::vector<std::string>& needles,
                         const std::vector<std::string>& extra = {}) {
        expect_failure(g, what, needles, /*at_load=*/true, extra);
    }

    // The u32 key `k` of `base` set to `v` must be rejected, naming the key
    // and every needle.
    void expect_u32_rejected(const EditableGguf& base, const std::string& k, uint32_t v,
                             std::vector<std::string> needles) {
        EditableGguf g = base;
        g.set(key(k), GgufValue::u32(v));
        needles.push_back("'" + key(k) + "'");
        expect_rejected(g, key(k) + " " + std::to_string(v), needles);
    }

    // Same for what only a run can find (the model map line comes first).
    void expect_run_fails(const EditableGguf& g, const std::string& what, const std::vector<std::string>& needles) {
        expect_failure(g, what, needles, /*at_load=*/false);
    }

    void expect_failure(const EditableGguf& g, const std::string& what, const std::vector<std::string>& needles,
                        bool at_load, const std::vector<std::string>& extra = {}) {
        const ProgramRun r = run(g, extra);
        const std::string ctx = family().arch + ", " + what + ", " + seed_note() + ": stderr '" + r.err + "'";
        ++checked_;
        EXPECT_EQ(r.signal, 0) << "killed by signal, " << ctx;
        EXPECT_EQ(r.status, 1) << ctx;
        ASSERT_FALSE(r.err_lines.empty()) << ctx;
        if (at_load) ASSERT_EQ(r.err_lines.size(), 1u) << "want exactly one stderr line, " << ctx;
        const std::string& line = r.err_lines.back();
        EXPECT_EQ(line.rfind("ds4: ", 0), 0u) << ctx;
        EXPECT_NE(line.find(model_.string()), std::string::npos) << "does not name the file, " << ctx;
        for (const auto& n : needles) EXPECT_NE(line.find(n), std::string::npos) << "does not name '" << n << "', " << ctx;
    }

    // The change `what` is legal: the model must still run.
    void expect_runs(const EditableGguf& g, const std::string& what, const std::vector<std::string>& extra = {}) {
        const ProgramRun r = run(g, extra);
        EXPECT_EQ(r.status, 0) << family().arch << ", " << what << ", " << seed_note() << ": stderr '" << r.err << "'";
    }

    fs::path dir_, model_, ids_;
    std::mt19937_64 rng_;
    int checked_ = 0;
};

TEST_P(CorruptModel, UnchangedRewriteRuns) {
    expect_runs(micro(), "unchanged");
    for (const auto& name : family().optional_tensors) {
        EditableGguf g = micro();
        g.drop(name);
        expect_runs(g, "without optional tensor " + name);
    }
}

TEST_P(CorruptModel, EveryMissingTensorIsNamed) {
    const EditableGguf base = micro();
    for (const auto& t : base.tensors) {
        if (std::find(family().optional_tensors.begin(), family().optional_tensors.end(), t.name) !=
            family().optional_tensors.end())
            continue;
        EditableGguf g = base;
        g.drop(t.name);
        expect_rejected(g, "without " + t.name, {"'" + t.name + "'"});
    }
    EXPECT_GT(checked_, 10);
}

// Every dimension of every tensor, to a random other size, and one extra
// dimension; a 3-D expert tensor's expert dimension also names expert_count.
TEST_P(CorruptModel, EveryWrongDimensionIsNamed) {
    const EditableGguf base = micro();
    for (const auto& t : base.tensors) {
        for (size_t d = 0; d <= t.ne.size() && d < 4; ++d) {
            std::vector<int64_t> ne = t.ne;
            if (d == t.ne.size()) {
                ne.push_back(2);
            } else {
                std::uniform_int_distribution<int64_t> size(1, 2 * t.ne[d] + 2);
                do ne[d] = size(rng_);
                while (ne[d] == t.ne[d]);
            }
            EditableGguf g = base;
            g.reshape(t.name, ne, rng_);
            std::vector<std::string> needles = {"'" + t.name + "'"};
            if (d == 2 && t.name.ends_with("_exps.weight")) needles.push_back(key("expert_count"));
            expect_rejected(g, t.name + " of shape " + shape_text(ne) + " instead of " + shape_text(t.ne), needles);
        }
    }
    EXPECT_GT(checked_, 30);
}

// A type ds4 cannot compute with (i32 of the same size), or a routing table
// that is not i32; every float tensor in f16 is legal.
TEST_P(CorruptModel, EveryWrongTypeIsNamed) {
    const EditableGguf base = micro();
    EditableGguf all_f16 = base;
    for (const auto& t : base.tensors) {
        EditableGguf g = base;
        EditableTensor& bad = g.tensor(t.name);
        bad.type = t.type == GgmlType::I32 ? GgmlType::F32 : GgmlType::I32;
        expect_rejected(g, t.name + " as " + std::string(ggml_type_name(bad.type)), {"'" + t.name + "'"});
        if (t.type == GgmlType::F32) {
            EditableTensor& h = all_f16.tensor(t.name);
            std::vector<float> v(t.bytes.size() / 4);
            std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
            h.type = GgmlType::F16;
            h.bytes.resize(v.size() * 2);
            fp32_to_fp16_row(v.data(), reinterpret_cast<uint16_t*>(h.bytes.data()), static_cast<int64_t>(v.size()));
        }
    }
    expect_runs(all_f16, "every f32 tensor in f16");
}

TEST_P(CorruptModel, EveryMissingRequiredKeyIsNamed) {
    const EditableGguf base = micro();
    for (const auto& k : family().required_keys) {
        EditableGguf g = base;
        g.value(key(k));  // the micro model has it
        g.erase(key(k));
        expect_rejected(g, "without " + key(k), {"'" + key(k) + "'"});
    }
    EditableGguf g = base;
    g.erase("general.architecture");
    expect_rejected(g, "without general.architecture", {"'general.architecture'"});
    g = base;
    g.set("general.architecture", GgufValue::string("llama"));
    expect_rejected(g, "architecture llama", {"'llama'"});
}

// Zero (where a size must be positive), huge, negative and text values.
TEST_P(CorruptModel, OutOfRangeCountsAreNamed) {
    const EditableGguf base = micro();
    std::uniform_int_distribution<uint64_t> huge(uint64_t{1} << 32, uint64_t{1} << 62);
    auto reject = [&](const std::string& k, GgufValue v, const std::string& what) {
        EditableGguf g = base;
        g.set(key(k), std::move(v));
        expect_rejected(g, key(k) + " " + what, {"'" + key(k) + "'"});
    };
    std::vector<std::string> all = family().counts;
    all.insert(all.end(), family().zero_allowed.begin(), family().zero_allowed.end());
    for (const auto& k : family().counts) reject(k, GgufValue::u32(0), "0");
    for (const auto& k : all) {
        const uint64_t h = huge(rng_);
        reject(k, GgufValue::u64(h), std::to_string(h));
        reject(k, GgufValue::i32(-1 - static_cast<int32_t>(rng_() % 1000)), "negative");
        reject(k, GgufValue::string("8"), "a string");
    }
    EXPECT_GT(checked_, 40);
}

TEST_P(CorruptModel, BadNumbersAreNamed) {
    const EditableGguf base = micro();
    auto reject = [&](const std::string& k, float v) {
        EditableGguf g = base;
        g.set(key(k), GgufValue::f32(v));
        expect_rejected(g, key(k) + " " + std::to_string(v), {"'" + key(k) + "'"});
    };
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    for (const auto& k : family().positive_numbers)
        for (float v : {0.0f, -1.5f, nan, inf}) reject(k, v);
    for (const auto& k : family().non_negative_numbers)
        for (float v : {-1e-3f, nan, -inf}) reject(k, v);
}

// The vocabulary: token_embd's rows, vocab_size, and the tokenizer's list.
TEST_P(CorruptModel, VocabularyMismatchIsNamed) {
    const EditableGguf base = micro();
    EditableGguf g = base;
    g.set(key("vocab_size"), GgufValue::u32(17));
    expect_rejected(g, "vocab_size 17", {"'token_embd.weight'", "'" + key("vocab_size") + "'"});
    g = base;
    g.set("tokenizer.ggml.tokens", GgufValue::string_array(std::vector<std::string>(17, "t")));
    expect_rejected(g, "17 tokens", {"'token_embd.weight'", "tokenizer.ggml.tokens"});
    g.set("tokenizer.ggml.tokens", GgufValue::string_array(std::vector<std::string>(16, "t")));
    expect_runs(g, "16 tokens");
}

// NaN and infinities are found only when asked for: the default load reads
// no weights. One bad element of a random f32 weight (a random one of its
// rows), and one bad block scale of a q8_0 expert tensor.
TEST_P(CorruptModel, BadValuesFailOnlyWithCheckTensors) {
    const EditableGguf base = micro();
    expect_runs(base, "clean, with --check-tensors", {"--check-tensors"});
    std::vector<const EditableTensor*> floats;
    for (const auto& t : base.tensors)
        if (t.type == GgmlType::F32) floats.push_back(&t);
    const EditableTensor& victim = *floats[rng_() % floats.size()];
    const int64_t rows = static_cast<int64_t>(victim.bytes.size() / 4) / victim.ne[0];
    const int64_t row = static_cast<int64_t>(rng_() % rows), col = static_cast<int64_t>(rng_() % victim.ne[0]);
    const uint32_t bad_bits[] = {0x7FC00000u, 0x7F800000u, 0xFF800000u};  // NaN, +inf, -inf
    EditableGguf g = base;
    std::memcpy(&g.tensor(victim.name).bytes[static_cast<size_t>(4 * (row * victim.ne[0] + col))],
                &bad_bits[rng_() % 3], 4);
    const std::string what = "a bad value in " + victim.name + " row " + std::to_string(row);
    expect_rejected(g, what, {"'" + victim.name + "'", " row " + std::to_string(row), "column " + std::to_string(col)},
                    {"--check-tensors"});
    expect_runs(g, what + ", without --check-tensors");

    // ds4-bench loads models the same way and takes the same flag.
    auto bench = [&](bool check) {
        std::vector<std::string> argv = {program("ds4-bench").string(), "-m", model_.string(), "-t", "2",
                                         "--ctx-start", "4", "--ctx-max", "4", "--step-incr", "1", "--gen-tokens", "1"};
        if (check) argv.push_back("--check-tensors");
        return run_program(argv, dir_ / "bench.err");
    };
    const ProgramRun checked = bench(true);
    EXPECT_EQ(checked.status, 1) << what << ", ds4-bench --check-tensors, " << seed_note() << ": " << checked.err;
    ASSERT_EQ(checked.err_lines.size(), 1u) << checked.err;
    EXPECT_EQ(checked.err_lines[0].rfind("ds4-bench: " + model_.string() + ": tensor '" + victim.name + "'", 0), 0u)
        << checked.err;
    // Without the flag the model loads (its greedy probe may then stop at
    // the NaN logits the bad weight makes: a sentence, not a crash).
    const ProgramRun unchecked = bench(false);
    EXPECT_EQ(unchecked.signal, 0) << unchecked.err;
    EXPECT_NE(unchecked.err.find("model map: "), std::string::npos) << what << ", ds4-bench, " << seed_note() << ": "
                                                                    << unchecked.err;
}

INSTANTIATE_TEST_SUITE_P(Families, CorruptModel, ::testing::Values(qwen3moe(), deepseek4(), glm_dsa()),
                         [](const auto& info) { return param_name(info.param); });

// ---- inconsistent hyper-parameters, family by family ------------------------------

class CorruptQwen3Moe : public CorruptModel {};
class CorruptDeepseek4 : public CorruptModel {};
class CorruptGlmDsa : public CorruptModel {};

TEST_P(CorruptQwen3Moe, InconsistentHparamsAreNamed) {
    const EditableGguf base = micro();
    auto reject = [&](const std::string& k, uint32_t v, std::vector<std::string> needles) {
        expect_u32_rejected(base, k, v, std::move(needles));
    };
    // Sizes that disagree with the tensors name the first tensor they miss
    // and the key behind the expected size.
    reject("embedding_length", 16, {"'token_embd.weight'"});
    reject("attention.head_count", 4, {"'blk.0.attn_q.weight'"});
    reject("attention.head_count_kv", 2, {"'blk.0.attn_k.weight'"});
    reject("expert_count", 6, {"'blk.0.ffn_gate_inp.weight'"});
    reject("expert_count", 2, {"'blk.0.ffn_gate_inp.weight'"});
    reject("expert_feed_forward_length", 16, {"'blk.0.ffn_gate_exps.weight'"});
    // Sizes that disagree with each other.
    reject("attention.head_count_kv", 3, {"'" + key("attention.head_count") + "'"});
    reject("expert_used_count", 5, {"'" + key("expert_count") + "'"});
    reject("attention.key_length", 6, {"'" + key("rope.dimension_count") + "'"});
    reject("rope.dimension_count", 3, {"'" + key("attention.key_length") + "'"});
    // More blocks than the file has.
    EditableGguf g = base;
    g.set(key("block_count"), GgufValue::u32(3));
    expect_rejected(g, "block_count 3", {"'blk.2."});
    // Head lengths default to embedding / heads, which must divide.
    g = base;
    for (const char* k : {"attention.key_length", "attention.value_length", "rope.dimension_count"}) g.erase(key(k));
    expect_runs(g, "head length from embedding_length / head_count");
    g.set(key("attention.head_count"), GgufValue::u32(3));
    expect_rejected(g, "8 embedding values in 3 heads", {"'" + key("embedding_length") + "'"});
    // An expert width the file does not state is the tensors'.
    g = base;
    g.erase(key("expert_feed_forward_length"));
    expect_runs(g, "expert width from the tensors");
    g.reshape("blk.1.ffn_up_exps.weight", {8, 16, 4}, rng_);
    expect_rejected(g, "layer 1's up experts wider than its gate experts", {"'blk.1.ffn_up_exps.weight'"});
    g = base;
    g.set(key("rope.scaling.type"), GgufValue::string("ntk"));
    expect_rejected(g, "rope scaling ntk", {"'" + key("rope.scaling.type") + "'"});
    // llama.cpp's ".scale" companions: f32, one value per expert.
    g = base;
    g.add("blk.1.ffn_down_exps.scale", GgmlType::F32, {4}, rng_);
    expect_runs(g, "an f32 expert scale");
    g.reshape("blk.1.ffn_down_exps.scale", {5}, rng_);
    expect_rejected(g, "an expert scale of 5 values", {"'blk.1.ffn_down_exps.scale'", "'" + key("expert_count") + "'"});
    g = base;
    g.add("blk.1.ffn_down_exps.scale", GgmlType::F16, {4}, rng_);
    expect_rejected(g, "an f16 expert scale", {"'blk.1.ffn_down_exps.scale'", "f32"});
    g = base;
    g.add("blk.0.attn_qkv.weight", GgmlType::F32, {8, 16}, rng_);
    expect_rejected(g, "a fused qkv tensor", {"'blk.0.attn_qkv.weight'"});
}

TEST_P(CorruptDeepseek4, InconsistentHparamsAreNamed) {
    const EditableGguf base = micro();
    auto reject = [&](const std::string& k, uint32_t v, std::vector<std::string> needles) {
        expect_u32_rejected(base, k, v, std::move(needles));
    };
    reject("embedding_length", 16, {"'token_embd.weight'"});
    reject("attention.head_count", 4, {"'blk.0.attn_sinks.weight'"});
    reject("attention.q_lora_rank", 8, {"'blk.0.attn_q_a.weight'"});
    reject("attention.output_group_count", 1, {"'blk.0.attn_output_a.weight'"});
    reject("attention.output_lora_rank", 2, {"'blk.0.attn_output_a.weight'"});
    reject("attention.indexer.head_count", 4, {"'blk.0.indexer.proj.weight'"});
    reject("attention.indexer.key_length", 6, {"'blk.0.indexer.attn_q_b.weight'"});
    reject("expert_count", 6, {"'blk.0.ffn_gate_inp.weight'"});
    reject("expert_used_count", 3, {"'blk.0.ffn_gate_tid2eid.weight'"});
    reject("expert_shared_count", 2, {"'blk.0.ffn_gate_shexp.weight'"});
    reject("expert_feed_forward_length", 16, {"'blk.0.ffn_gate_exps.weight'"});
    reject("hyper_connection.count", 3, {"'output_hc_fn.weight'"});
    reject("attention.head_count", 3, {"'" + key("attention.output_group_count") + "'"});
    reject("attention.key_length", 10, {"'" + key("attention.value_length") + "'"});
    reject("rope.dimension_count", 5, {"'" + key("attention.key_length") + "'"});
    reject("rope.dimension_count", 6, {"'" + key("attention.indexer.key_length") + "'"});
    reject("expert_used_count", 5, {"'" + key("expert_count") + "'"});
    reject("expert_gating_func", 1, {});
    reject("hash_layer_count", 4, {});
    // A hash layer more than the file has tables for; a compressed layer
    // more than it has compressors for.
    EditableGguf g = base;
    g.set(key("hash_layer_count"), GgufValue::u32(2));
    expect_rejected(g, "two hash layers", {"'blk.1.ffn_gate_tid2eid.weight'"});
    g = base;
    g.set(key("block_count"), GgufValue::u32(4));  // the per-layer arrays hold 3 (and 4) values
    expect_rejected(g, "block_count 4", {"'" + key("block_count") + "'"});
    // Per-layer arrays: too short, of the wrong element type, bad values.
    const std::string ratios = key("attention.compress_ratios");
    for (auto [v, what] : std::vector<std::pair<GgufValue, std::string>>{
             {GgufValue::int_array(GgufValueType::I32, {4, 128}), "two ratios"},
             {GgufValue::int_array(GgufValueType::I32, {4, 5, 0, 0}), "ratio 5"},
             {GgufValue::float_array(GgufValueType::F32, {4, 128, 0, 0}), "float ratios"},
             {GgufValue::string_array({"4", "128", "0", "0"}), "text ratios"},
             {GgufValue::u32(4), "a scalar"}}) {
        g = base;
        g.set(ratios, v);
        expect_rejected(g, ratios + " as " + what, {"'" + ratios + "'"});
    }
    g = base;
    g.set(ratios, GgufValue::int_array(GgufValueType::I32, {4, 128, 4, 0}));
    expect_rejected(g, "layer 2 compressed without compressor tensors", {"'blk.2.attn_compressor_"});
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (const char* name : {"swiglu_clamp_exp", "swiglu_clamp_shexp"}) {
        const std::string k = key(name);
        for (auto [v, what] : std::vector<std::pair<GgufValue, std::string>>{
                 {GgufValue::float_array(GgufValueType::F32, {10, 10}), "two values"},
                 {GgufValue::float_array(GgufValueType::F32, {10, nan, 10}), "a NaN"},
                 {GgufValue::string_array({"10", "10", "10"}), "text"},
                 {GgufValue::f32(nan), "a NaN scalar"}}) {
            g = base;
            g.set(k, v);
            expect_rejected(g, k + " as " + what, {"'" + k + "'"});
        }
    }
    // The hash-routing table is read on the device without checks, so the
    // load checks every id: one expert id outside the experts, anywhere in
    // the table, fails the run with its name.
    g = base;
    EditableTensor& table = g.tensor("blk.0.ffn_gate_tid2eid.weight");
    const int32_t bad = static_cast<int32_t>(rng_() % 2 ? -1 - int32_t(rng_() % 100) : 4 + int32_t(rng_() % 100));
    std::memcpy(&table.bytes[4 * (rng_() % (table.bytes.size() / 4))], &bad, 4);
    expect_run_fails(g, "expert " + std::to_string(bad) + " in the hash table", {"'blk.0.ffn_gate_tid2eid.weight'"});
}

TEST_P(CorruptGlmDsa, InconsistentHparamsAreNamed) {
    const EditableGguf base = micro();
    auto reject = [&](const std::string& k, uint32_t v, std::vector<std::string> needles) {
        expect_u32_rejected(base, k, v, std::move(needles));
    };
    reject("embedding_length", 16, {"'token_embd.weight'"});
    reject("attention.head_count", 4, {"'blk.0.attn_q_b.weight'"});
    reject("attention.q_lora_rank", 16, {"'blk.0.attn_q_a.weight'"});
    reject("attention.kv_lora_rank", 16, {"'blk.0.attn_kv_a_mqa.weight'"});
    reject("attention.value_length_mla", 8, {"'blk.0.attn_v_b.weight'"});
    reject("attention.indexer.head_count", 4, {"'blk.0.indexer.attn_q_b.weight'"});
    reject("attention.indexer.key_length", 16, {"'blk.0.indexer.attn_q_b.weight'"});
    reject("feed_forward_length", 32, {"'blk.0.ffn_gate.weight'"});
    reject("expert_count", 8, {"'blk.1.ffn_gate_inp.weight'"});
    reject("expert_shared_count", 2, {"'blk.1.ffn_gate_shexp.weight'"});
    reject("expert_feed_forward_length", 16, {"'blk.1.ffn_gate_exps.weight'"});
    reject("rope.dimension_count", 8, {"'" + key("attention.key_length_mla") + "'"});
    reject("rope.dimension_count", 3, {});
    reject("attention.indexer.key_length", 2, {"'" + key("rope.dimension_count") + "'"});
    reject("expert_used_count", 5, {"'" + key("expert_count") + "'"});
    reject("expert_group_count", 3, {"'" + key("expert_group_used_count") + "'"});
    reject("expert_group_used_count", 3, {"'" + key("expert_group_count") + "'"});
    reject("expert_gating_func", 1, {"softmax"});
    reject("leading_dense_block_count", 3, {"'" + key("leading_dense_block_count") + "'"});
    EditableGguf g = base;
    g.set(key("leading_dense_block_count"), GgufValue::u32(0));  // block 0 then needs experts
    expect_rejected(g, "no dense block", {"'blk.0.ffn_gate_inp.weight'"});
    // The indexer schedule: block 0 cannot reuse an earlier block's
    // selection; block 1 with its own indexer needs its tensors.
    const std::string types = key("attention.indexer.types");
    g = base;
    g.set(types, GgufValue::int_array(GgufValueType::U32, {0, 0}));
    expect_rejected(g, "block 0 sharing", {"'" + types + "'"});
    g = base;
    g.set(types, GgufValue::int_array(GgufValueType::U32, {1}));
    expect_rejected(g, "one type for two blocks", {"'" + types + "'"});
    g = base;
    g.set(types, GgufValue::string_array({"1", "0"}));
    expect_rejected(g, "text types", {"'" + types + "'"});
    g = base;
    g.set(types, GgufValue::int_array(GgufValueType::U32, {1, 1}));
    g.drop("blk.1.indexer.proj.weight");
    expect_rejected(g, "a full block without its indexer", {"'blk.1.indexer.proj.weight'"});
    // An MTP block the file carries (its eh_proj is there) is checked
    // whole, though never run; one the file leaves out is legal (llama.cpp
    // loads such a trunk-only file too).
    g = base;
    g.set(key("block_count"), GgufValue::u32(3));
    g.set(key("nextn_predict_layers"), GgufValue::u32(1));
    expect_runs(g, "an MTP block announced, not carried");
    g.add("blk.2.nextn.eh_proj.weight", GgmlType::F32, {16, 8}, rng_);
    expect_rejected(g, "an MTP block without its tensors", {"'blk.2.attn_norm.weight'"});
}

// A quantized weight: the f16 scale of one Q8_0 block (a real-width tiny
// model, one layer) set to NaN or an infinity.
TEST_P(CorruptQwen3Moe, BadQ8_0ScaleFailsOnlyWithCheckTensors) {
    const fs::path src = dir_ / "tiny-q8_0.gguf";
    const ProgramRun synth =
        run_program({program("ds4-gguf").string(), "synth", "--arch", "qwen3moe", "--preset", "tiny", "--type", "q8_0",
                     "--no-tokenizer", "--n-layer", "1", "--seed", std::to_string(test_seed()), "--out", src.string()},
                    dir_ / "synth.err");
    ASSERT_EQ(synth.status, 0) << synth.err;
    EditableGguf g = EditableGguf::read(src);
    EditableTensor& up = g.tensor("blk.0.ffn_up_exps.weight");  // [64, 64, 8]
    ASSERT_EQ(up.type, GgmlType::Q8_0);
    const int64_t rows = up.ne[1] * up.ne[2], blocks_per_row = up.ne[0] / 32;
    const int64_t row = static_cast<int64_t>(rng_() % rows), block = static_cast<int64_t>(rng_() % blocks_per_row);
    const uint16_t bad[] = {0x7E00, 0x7C00, 0xFC00};  // f16 NaN, +inf, -inf
    std::memcpy(&up.bytes[static_cast<size_t>((row * blocks_per_row + block) * 34)], &bad[rng_() % 3], 2);
    const std::string what = "a bad q8_0 scale in row " + std::to_string(row) + ", block " + std::to_string(block);
    expect_rejected(g, what,
                    {"'blk.0.ffn_up_exps.weight'", " row " + std::to_string(row) + " (matrix " +
                                                       std::to_string(row / up.ne[1]) + ", its row " +
                                                       std::to_string(row % up.ne[1]) + "), column " +
                                                       std::to_string(block * 32)},
                    {"--check-tensors"});
    expect_runs(g, what + ", without --check-tensors");
}

INSTANTIATE_TEST_SUITE_P(Family, CorruptQwen3Moe, ::testing::Values(qwen3moe()),
                         [](const auto& info) { return info.param.arch; });
INSTANTIATE_TEST_SUITE_P(Family, CorruptDeepseek4, ::testing::Values(deepseek4()),
                         [](const auto& info) { return info.param.arch; });
INSTANTIATE_TEST_SUITE_P(Family, CorruptGlmDsa, ::testing::Values(glm_dsa()),
                         [](const auto& info) { return param_name(info.param); });

}  // namespace
}  // namespace ds4

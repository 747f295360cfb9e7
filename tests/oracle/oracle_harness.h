// Shared helpers for the differential tests: run programs, make fresh random
// models and inputs, run ds4 and llama.cpp on them, compare the logits.
//
// Every helper that can fail throws std::runtime_error with one sentence;
// GoogleTest reports an exception thrown from a test body as a failure, so a
// missing tool or a crashed engine fails the test, it never skips it.
//
// Where things are found:
//   ds4, ds4-gguf           $DS4_BIN (the build dir; ctest sets it), else DS4_BINARY_DIR
//   llama_logits, ...       next to the test executable (CMake builds the
//                           oracle tools into the same tests/ folder)
//   test-llama-archs, ...   DS4_ORACLE_DIR/bin
//
// Set DS4_KEEP_TEMP=1 to keep the temporary files of a run for inspection.
#pragma once

#include <gguf.h>
#include <ggml.h>
#include <gtest/gtest.h>

#include "support/near_tie.h"
#include "support/test_seed.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ds4::oracle {

namespace fs = std::filesystem;

// ---- programs -------------------------------------------------------------

struct CommandResult {
    std::string command;
    int exit_code = -1;  // 128 + signal when killed by a signal
    std::string output;  // stdout and stderr together

    std::string describe() const {
        return "`" + command + "` exited with " + std::to_string(exit_code) + ":\n" + output;
    }
};

inline std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) {
        if (c == '\'') q += "'\\''";
        else q += c;
    }
    return q + "'";
}

inline CommandResult run_command(const std::vector<std::string>& argv) {
    CommandResult r;
    for (const auto& a : argv) {
        if (!r.command.empty()) r.command += ' ';
        r.command += shell_quote(a);
    }
    FILE* p = ::popen((r.command + " 2>&1").c_str(), "r");
    if (p == nullptr) throw std::runtime_error("cannot start `" + r.command + "`");
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
    const int status = ::pclose(p);
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
    return r;
}

// Runs argv and throws unless it exits 0.
inline CommandResult run_checked(const std::vector<std::string>& argv) {
    CommandResult r = run_command(argv);
    if (r.exit_code != 0) throw std::runtime_error(r.describe());
    return r;
}

inline fs::path build_dir() {
    if (const char* b = std::getenv("DS4_BIN"); b != nullptr && *b != '\0') return b;
    return DS4_BINARY_DIR;
}

inline fs::path require_program(const fs::path& p) {
    std::error_code ec;
    if (!fs::is_regular_file(p, ec) || ::access(p.c_str(), X_OK) != 0) {
        throw std::runtime_error("program " + p.string() + " is missing (build it, or run scripts/setup-tests.sh for the oracles)");
    }
    return p;
}

// ds4's own programs: ds4, ds4-gguf.
inline fs::path ds4_program(const std::string& name) { return require_program(build_dir() / name); }

// The programs built from tests/oracle_tools/*.cpp.
inline fs::path oracle_tool(const std::string& name) {
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (!ec && fs::is_regular_file(self.parent_path() / name)) return self.parent_path() / name;
    return require_program(build_dir() / "tests" / name);
}

// llama.cpp's own programs (test-llama-archs, llama-quantize).
inline fs::path oracle_bin(const std::string& name) {
    return require_program(fs::path(DS4_ORACLE_DIR) / "bin" / name);
}

// ---- temporary files and randomness -----------------------------------------

class TempDir {
public:
    TempDir() {
        const char* t = std::getenv("TMPDIR");
        std::string templ = std::string(t != nullptr && *t != '\0' ? t : "/tmp") + "/ds4-oracle-XXXXXX";
        if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("cannot create a directory from " + templ);
        path_ = templ;
    }
    ~TempDir() {
        const char* keep = std::getenv("DS4_KEEP_TEMP");
        if (keep != nullptr && *keep != '\0' && *keep != '0') {
            std::fprintf(stderr, "keeping %s\n", path_.c_str());
            return;
        }
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const fs::path& path() const { return path_; }
    fs::path operator/(const std::string& name) const { return path_ / name; }

private:
    fs::path path_;
};

// A new seed every run, or DS4_TEST_SEED (tests/support/test_seed.h). Tests print it.
inline uint64_t fresh_seed() { return ds4::test::test_seed(); }

// test-llama-archs takes a size_t seed; keep it in 31 bits so every tool
// that might parse it as an int agrees.
inline uint32_t model_seed(uint64_t seed) { return uint32_t(seed & 0x7fffffff); }

inline std::vector<int32_t> random_token_ids(std::mt19937_64& rng, size_t n, int32_t n_vocab) {
    std::uniform_int_distribution<int32_t> d(0, n_vocab - 1);
    std::vector<int32_t> ids(n);
    for (auto& id : ids) id = d(rng);
    return ids;
}

inline void write_token_file(const fs::path& path, const std::vector<int32_t>& ids) {
    std::ofstream out(path);
    for (size_t i = 0; i < ids.size(); ++i) out << ids[i] << (i + 1 == ids.size() ? '\n' : ' ');
    if (!out.flush()) throw std::runtime_error("cannot write token id file " + path.string());
}

// ---- GGUF files (read with ggml's gguf API, not ds4's reader) ----------------

// The optional per-tensor multipliers llama.cpp's loader looks for next to a
// weight: `<weight>.scale` and `<weight>.input_scale`.
inline bool is_optional_scale_tensor_name(const std::string& name) {
    auto ends = [&](const std::string& suf) {
        return name.size() >= suf.size() && name.compare(name.size() - suf.size(), suf.size(), suf) == 0;
    };
    return ends(".scale") || ends(".input_scale");
}

struct GgufTensorInfo {
    std::string name;
    ggml_type type;
    std::vector<int64_t> shape;
};

struct GgufSummary {
    std::string arch;
    int32_t n_vocab = 0;
    int64_t n_kv = 0;
    std::vector<GgufTensorInfo> tensors;

    bool has_tensor_type(ggml_type t) const {
        return std::any_of(tensors.begin(), tensors.end(), [&](const auto& x) { return x.type == t; });
    }
    bool any_quantized() const {
        return std::any_of(tensors.begin(), tensors.end(), [](const auto& x) { return ggml_is_quantized(x.type); });
    }
    size_t count_if_name(bool (*pred)(const std::string&)) const {
        return size_t(std::count_if(tensors.begin(), tensors.end(), [&](const auto& x) { return pred(x.name); }));
    }
};

inline GgufSummary read_gguf_summary(const fs::path& path) {
    ggml_context* meta = nullptr;
    gguf_init_params params{/*no_alloc=*/true, &meta};
    gguf_context* g = gguf_init_from_file(path.c_str(), params);
    if (g == nullptr) throw std::runtime_error("ggml cannot read GGUF file " + path.string());
    GgufSummary s;
    s.n_kv = gguf_get_n_kv(g);
    if (int64_t k = gguf_find_key(g, "general.architecture"); k >= 0) s.arch = gguf_get_val_str(g, k);
    if (int64_t k = gguf_find_key(g, "tokenizer.ggml.tokens"); k >= 0) s.n_vocab = int32_t(gguf_get_arr_n(g, k));
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        const char* name = gguf_get_tensor_name(g, i);
        const ggml_tensor* t = ggml_get_tensor(meta, name);
        GgufTensorInfo info{name, t->type, {}};
        for (int d = 0; d < ggml_n_dims(t); ++d) info.shape.push_back(t->ne[d]);
        s.tensors.push_back(std::move(info));
    }
    gguf_free(g);
    ggml_free(meta);
    if (s.n_vocab <= 0) throw std::runtime_error("GGUF file " + path.string() + " has no tokenizer.ggml.tokens");
    return s;
}

// Every tensor's stored type, by name (also for files without a tokenizer,
// which read_gguf_summary refuses).
inline std::map<std::string, ggml_type> gguf_tensor_types(const fs::path& path) {
    ggml_context* meta = nullptr;
    gguf_init_params params{/*no_alloc=*/true, &meta};
    gguf_context* g = gguf_init_from_file(path.c_str(), params);
    if (g == nullptr) throw std::runtime_error("ggml cannot read GGUF file " + path.string());
    std::map<std::string, ggml_type> types;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) types[gguf_get_tensor_name(g, i)] = gguf_get_tensor_type(g, i);
    gguf_free(g);
    ggml_free(meta);
    return types;
}

// ---- making models ---------------------------------------------------------

// test-llama-archs's random-weight MoE model of `arch` (F32, with every
// optional tensor llama.cpp knows, including `.scale` multipliers).
inline fs::path generate_arch_model(const std::string& arch, uint32_t seed, const fs::path& dir) {
    const fs::path out = dir / ("archs-" + std::to_string(seed));
    fs::create_directories(out);
    run_checked({oracle_bin("test-llama-archs").string(), "-a", "^(" + arch + ")$", "-s", std::to_string(seed),
                 "-o", out.string()});
    const fs::path model = out / (arch + "-moe.gguf");
    if (!fs::is_regular_file(model)) {
        throw std::runtime_error("test-llama-archs wrote no " + model.string());
    }
    return model;
}

inline fs::path strip_scales(const fs::path& in, const fs::path& out) {
    run_checked({oracle_tool("llama_strip_scales").string(), in.string(), out.string()});
    return out;
}

inline fs::path dequantize(const fs::path& in, const fs::path& out) {
    run_checked({oracle_tool("llama_dequant").string(), in.string(), out.string()});
    return out;
}

// `type` is a llama-quantize type name: Q4_K_M, Q8_0, Q2_K, ...
inline fs::path quantize(const fs::path& in, const fs::path& out, const std::string& type, int threads = 2) {
    run_checked({oracle_bin("llama-quantize").string(), in.string(), out.string(), type, std::to_string(threads)});
    return out;
}

// More experts than test-llama-archs's 2-of-2 (so top-k routing and the
// renormalised routing weights matter) and fewer KV heads (grouped-query
// attention); see tests/oracle_tools/llama_widen_moe.cpp. F32 input only.
struct MoeShape {
    int experts = 8;
    int experts_used = 3;
    int kv_heads = 1;
};

inline fs::path widen_moe(const fs::path& in, const fs::path& out, const MoeShape& shape, uint32_t seed) {
    run_checked({oracle_tool("llama_widen_moe").string(), in.string(), out.string(), "--experts",
                 std::to_string(shape.experts), "--experts-used", std::to_string(shape.experts_used), "--kv-heads",
                 std::to_string(shape.kv_heads), "--seed", std::to_string(seed + 1)});
    return out;
}

// DeepSeek V4 (deepseek4) files from test-llama-archs have 2 experts (both
// used), no hash-routed layers and an indexer top-k above any prompt; see
// tests/oracle_tools/llama_dsv4_rewrite.cpp. F32 input only.
struct Dsv4Rewrite {
    int experts = 8;
    int experts_used = 3;
    int hash_layers = 2;
    int indexer_top_k = 8;
};

inline fs::path dsv4_rewrite(const fs::path& in, const fs::path& out, const Dsv4Rewrite& r, uint32_t seed) {
    run_checked({oracle_tool("llama_dsv4_rewrite").string(), in.string(), out.string(), "--experts",
                 std::to_string(r.experts), "--experts-used", std::to_string(r.experts_used), "--hash-layers",
                 std::to_string(r.hash_layers), "--indexer-top-k", std::to_string(r.indexer_top_k), "--seed",
                 std::to_string(seed + 2)});
    return out;
}

// The F32 model redrawn at a trained checkpoint's magnitudes (norm gains ~1,
// matrices N(0, 1/fan_in), embeddings N(0, 1); tests/oracle_tools/
// llama_realistic.cpp). The generator's N(0, 0.1) everywhere leaves
// attention and routing nearly uniform, so RoPE, score and routing bugs
// barely move its logits.
inline fs::path realistic(const fs::path& in, const fs::path& out, uint32_t seed) {
    run_checked({oracle_tool("llama_realistic").string(), in.string(), out.string(), "--seed",
                 std::to_string(seed + 3)});
    return out;
}

// The stimuli most oracle tests use: llama.cpp's generator model of the
// family without its .scale tensors, rewritten so routing (and for DeepSeek
// V4 hash routing and the indexer's top-k) matters, redrawn at realistic
// magnitudes. Files go to `dir`.
inline fs::path realistic_qwen3moe(const fs::path& dir, uint32_t seed, const MoeShape& shape = {}) {
    const fs::path s = strip_scales(generate_arch_model("qwen3moe", seed, dir), dir / "qwen3moe-stripped.gguf");
    return realistic(widen_moe(s, dir / "qwen3moe-widened.gguf", shape, seed), dir / "qwen3moe-routed.gguf", seed);
}

inline fs::path realistic_deepseek4(const fs::path& dir, uint32_t seed, const Dsv4Rewrite& r = {}) {
    const fs::path s = strip_scales(generate_arch_model("deepseek4", seed, dir), dir / "deepseek4-stripped.gguf");
    return realistic(dsv4_rewrite(s, dir / "deepseek4-rewritten.gguf", r, seed), dir / "deepseek4-routed.gguf", seed);
}

// GLM-5 (glm-dsa) files from test-llama-archs have 2 experts (both used), no
// expert groups, plain routing weights, a full indexer in every block and an
// indexer top-k above any prompt, and 64 indexer heads (most of the file's
// bytes); see tests/oracle_tools/llama_glm_rewrite.cpp. F32 input only.
// indexer_types "" keeps every block's own indexer.
struct GlmRewrite {
    int experts = 8, experts_used = 3, groups = 4, groups_used = 2, top_k = 32, indexer_heads = 16;
    std::string indexer_types;
};

inline fs::path glm_rewrite(const fs::path& in, const fs::path& out, const GlmRewrite& r, uint32_t seed) {
    std::vector<std::string> argv = {oracle_tool("llama_glm_rewrite").string(), in.string(), out.string(),
                                     "--experts", std::to_string(r.experts), "--experts-used",
                                     std::to_string(r.experts_used), "--expert-groups", std::to_string(r.groups),
                                     "--groups-used", std::to_string(r.groups_used), "--indexer-top-k",
                                     std::to_string(r.top_k), "--indexer-heads", std::to_string(r.indexer_heads),
                                     "--weights-norm", "1", "--weights-scale", "2.5", "--seed",
                                     std::to_string(seed + 2)};
    if (!r.indexer_types.empty()) argv.insert(argv.end(), {"--indexer-types", r.indexer_types});
    run_checked(argv);
    return out;
}

inline fs::path realistic_glm_dsa(const fs::path& dir, uint32_t seed, const GlmRewrite& r = {}) {
    const fs::path s = strip_scales(generate_arch_model("glm-dsa", seed, dir), dir / "glm-dsa-stripped.gguf");
    return realistic(glm_rewrite(s, dir / "glm-dsa-rewritten.gguf", r, seed), dir / "glm-dsa-routed.gguf", seed);
}

// A copy of `in` with planted bugs (tests/oracle_tools/llama_mutate.cpp), e.g.
// {"--scale-f32", "qwen3moe.rope.freq_base", "1.01"}.
inline fs::path mutate(const fs::path& in, const fs::path& out, const std::vector<std::string>& mutations) {
    std::vector<std::string> argv = {oracle_tool("llama_mutate").string(), in.string(), out.string()};
    argv.insert(argv.end(), mutations.begin(), mutations.end());
    run_checked(argv);
    return out;
}

// An importance matrix in llama.cpp's legacy binary format (int32 entry
// count; per entry int32 name length, name, int32 call count, int32 value
// count, float values; then int32 chunk count and a dataset name) with
// weight 1 for every input column of every tensor whose name contains
// `name_part` (per expert for 3-D tensors). IQ2_XXS refuses to quantize
// without one; uniform importance is the neutral choice for random weights.
inline fs::path write_uniform_imatrix(const fs::path& model, const fs::path& out, const std::string& name_part) {
    const GgufSummary s = read_gguf_summary(model);
    std::ofstream f(out, std::ios::binary);
    auto i32 = [&](int32_t v) { f.write(reinterpret_cast<const char*>(&v), sizeof v); };
    std::vector<const GgufTensorInfo*> picked;
    for (const auto& t : s.tensors)
        if (t.name.find(name_part) != std::string::npos && t.shape.size() >= 2) picked.push_back(&t);
    i32(int32_t(picked.size()));
    for (const auto* t : picked) {
        const int64_t n = t->shape[0] * (t->shape.size() > 2 ? t->shape[2] : 1);
        i32(int32_t(t->name.size()));
        f.write(t->name.data(), std::streamsize(t->name.size()));
        i32(1);
        i32(int32_t(n));
        const std::vector<float> ones(size_t(n), 1.0f);
        f.write(reinterpret_cast<const char*>(ones.data()), std::streamsize(n * sizeof(float)));
    }
    i32(1);
    const std::string dataset = "uniform";
    i32(int32_t(dataset.size()));
    f.write(dataset.data(), std::streamsize(dataset.size()));
    if (!f.flush()) throw std::runtime_error("cannot write importance matrix " + out.string());
    return out;
}

// llama-quantize with a base type, per-tensor overrides ("ffn_up_exps=iq2_xxs")
// and an optional importance matrix.
inline fs::path quantize_mixed(const fs::path& in, const fs::path& out, const std::string& base,
                               const std::vector<std::string>& overrides, const fs::path& imatrix = {},
                               int threads = 2) {
    std::vector<std::string> argv = {oracle_bin("llama-quantize").string()};
    if (!imatrix.empty()) argv.insert(argv.end(), {"--imatrix", imatrix.string()});
    for (const auto& o : overrides) argv.insert(argv.end(), {"--tensor-type", o});
    argv.insert(argv.end(), {in.string(), out.string(), base, std::to_string(threads)});
    run_checked(argv);
    return out;
}

// ---- logits -----------------------------------------------------------------

struct Logits {
    size_t n_tokens = 0;
    size_t n_vocab = 0;
    std::vector<float> values;  // n_tokens x n_vocab, row-major

    const float* row(size_t i) const { return values.data() + i * n_vocab; }
    size_t argmax(size_t i) const {
        const float* r = row(i);
        return size_t(std::max_element(r, r + n_vocab) - r);
    }
};

inline Logits read_logits(const fs::path& path, size_t n_tokens, size_t n_vocab) {
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) throw std::runtime_error("logits dump " + path.string() + " was not written");
    const size_t want = n_tokens * n_vocab * sizeof(float);
    if (size != want) {
        throw std::runtime_error("logits dump " + path.string() + " has " + std::to_string(size) + " bytes, not " +
                                 std::to_string(want) + " (" + std::to_string(n_tokens) + " tokens x " +
                                 std::to_string(n_vocab) + " vocab x 4)");
    }
    Logits l{n_tokens, n_vocab, std::vector<float>(n_tokens * n_vocab)};
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(l.values.data()), std::streamsize(want));
    if (!in) throw std::runtime_error("cannot read logits dump " + path.string());
    return l;
}

enum class Engine { ds4, llama };

inline const char* engine_name(Engine e) { return e == Engine::ds4 ? "ds4" : "llama.cpp"; }

struct RunOptions {
    int threads = 2;
    std::optional<int> prefill_chunk;  // ds4 only
    fs::path selection_margins;        // llama.cpp only: where to write them (llama_selection_margins.h)
};

// Evaluates `tokens` with one engine through the differential interface
// (`-m MODEL --token-ids FILE --dump-logits OUT`) and reads the dump back.
inline Logits engine_logits(Engine e, const fs::path& model, const std::vector<int32_t>& tokens, size_t n_vocab,
                            const fs::path& workdir, const RunOptions& opt = {}) {
    static int serial = 0;
    const std::string stem = std::string(e == Engine::ds4 ? "ds4" : "llama") + "-" + std::to_string(serial++);
    const fs::path ids = workdir / (stem + ".ids");
    const fs::path out = workdir / (stem + ".logits");
    write_token_file(ids, tokens);
    std::vector<std::string> argv = {
        e == Engine::ds4 ? ds4_program("ds4").string() : oracle_tool("llama_logits").string(),
        "-m", model.string(), "--token-ids", ids.string(), "--dump-logits", out.string(),
        "-t", std::to_string(opt.threads)};
    if (e == Engine::ds4 && opt.prefill_chunk) {
        argv.insert(argv.end(), {"--prefill-chunk", std::to_string(*opt.prefill_chunk)});
    }
    if (e == Engine::llama && !opt.selection_margins.empty()) {
        argv.insert(argv.end(), {"--selection-margins", opt.selection_margins.string()});
    }
    run_checked(argv);
    return read_logits(out, tokens.size(), n_vocab);
}

// ---- prompts the reference decides clearly ----------------------------------

// kMinSelectionMargin (support/near_tie.h): how near a tie a top-k choice of
// the reference may come before the input is drawn again.
using ds4::test::kMinSelectionMargin;

struct SelectionMargin {
    double margin;
    std::string site;  // the reference's score tensor, e.g. lid_score_masked-2
};

inline std::vector<SelectionMargin> read_selection_margins(const fs::path& path, size_t n_tokens) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("selection margins " + path.string() + " were not written");
    std::vector<SelectionMargin> m(n_tokens);
    size_t pos = 0;
    std::string margin;
    for (size_t i = 0; i < n_tokens; ++i) {
        if (!(in >> pos >> margin >> m[i].site) || pos != i) {
            throw std::runtime_error("selection margins " + path.string() + " are malformed at line " +
                                     std::to_string(i + 1));
        }
        m[i].margin = std::strtod(margin.c_str(), nullptr);
    }
    return m;
}

struct Reference {
    std::vector<int32_t> ids;
    Logits logits;
};

// llama.cpp's logits for a fresh prompt of `ids.size()` tokens on which none
// of its top-k choices is within kMinSelectionMargin of a tie. Where one is,
// the tokens from that position on are drawn again: the positions before it
// are causal and keep their tokens, logits and margins, so each redraw moves
// the first close call forward and the prompt stays as random as before.
// Throws when a prompt cannot be completed that way (a router or indexer that
// ties everywhere is itself worth a look).
inline Reference clearly_decided_reference(const fs::path& model, std::vector<int32_t> ids, size_t n_vocab,
                                           const fs::path& workdir, std::mt19937_64& rng) {
    constexpr int kMaxRedraws = 64;
    for (int attempt = 0;; ++attempt) {
        RunOptions opt;
        opt.selection_margins = workdir / "reference.margins";
        Logits logits = engine_logits(Engine::llama, model, ids, n_vocab, workdir, opt);
        const auto margins = read_selection_margins(opt.selection_margins, ids.size());
        size_t close = 0;
        while (close < ids.size() && !(margins[close].margin < kMinSelectionMargin)) ++close;
        if (close == ids.size()) return Reference{std::move(ids), std::move(logits)};
        if (attempt == kMaxRedraws) {
            throw std::runtime_error("llama.cpp still makes a top-k choice within " +
                                     std::to_string(kMinSelectionMargin) + " of a tie (" + margins[close].site +
                                     " at position " + std::to_string(close) + ") after " +
                                     std::to_string(kMaxRedraws) + " redraws of " + model.string());
        }
        std::printf("reference: %s at position %zu is %.2e from a tie; drawing tokens %zu.. again\n",
                    margins[close].site.c_str(), close, margins[close].margin, close);
        const auto tail = random_token_ids(rng, ids.size() - close, int32_t(n_vocab));
        std::copy(tail.begin(), tail.end(), ids.begin() + std::ptrdiff_t(close));
    }
}

// ---- comparing logits -------------------------------------------------------

struct Tolerance {
    double max_rel_l2;         // per row: ||ours - ref|| / ||ref||
    double min_argmax_agree;   // fraction of rows; 1.0 = every row
};

// ds4's CPU path does float arithmetic on exactly decoded weights, and so
// does llama.cpp on an F32 file (or on a quantized file dequantized to F32):
// the two differ only in summation order (measured ~1e-6). 1e-4 with every
// argmax is the bound for F32 and quantized files alike; a looser one lets a
// wrong block decode in one expert pass.
inline constexpr Tolerance kF32Tolerance{1e-4, 1.0};

inline double l2(const float* a, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += double(a[i]) * a[i];
    return std::sqrt(s);
}

inline double rel_l2(const float* ours, const float* ref, size_t n) {
    double d = 0, r = 0;
    for (size_t i = 0; i < n; ++i) {
        d += (double(ours[i]) - ref[i]) * (double(ours[i]) - ref[i]);
        r += double(ref[i]) * ref[i];
    }
    return r > 0 ? std::sqrt(d / r) : (d > 0 ? INFINITY : 0.0);
}

// A differing argmax is accepted only where the reference's margin is within
// the row's measured noise, a few times per 64 rows (tests/support/near_tie.h).
using ds4::test::near_tie;

struct Comparison {
    bool passed = true;
    double worst_rel_l2 = 0;
    size_t worst_row = 0;
    size_t argmax_agree = 0;  // rows with the same argmax (near-ties counted separately)
    size_t near_ties = 0;
    size_t n_rows = 0;
    std::string table;  // one line per row, then a summary
};

inline Comparison compare_logits(const Logits& ours, const Logits& ref, const Tolerance& tol) {
    Comparison c;
    if (ours.n_tokens != ref.n_tokens || ours.n_vocab != ref.n_vocab) {
        c.passed = false;
        c.table = "shapes differ: ours " + std::to_string(ours.n_tokens) + "x" + std::to_string(ours.n_vocab) +
                  ", reference " + std::to_string(ref.n_tokens) + "x" + std::to_string(ref.n_vocab) + "\n";
        return c;
    }
    c.n_rows = ref.n_tokens;
    std::ostringstream t;
    t << "  pos   rel_l2     argmax ours/ref   ref top-2 gap   \n";
    bool rows_ok = true;
    for (size_t i = 0; i < ref.n_tokens; ++i) {
        const double r = rel_l2(ours.row(i), ref.row(i), ref.n_vocab);
        const bool finite = std::isfinite(r);
        if (!finite || r > c.worst_rel_l2) {
            c.worst_rel_l2 = finite ? r : INFINITY;
            c.worst_row = i;
        }
        const size_t ao = ours.argmax(i), ar = ref.argmax(i);
        std::string flag;
        if (ao == ar) {
            ++c.argmax_agree;
        } else if (tol.min_argmax_agree >= 1.0 && near_tie(ours.row(i), ref.row(i), ref.n_vocab, ao, ar)) {
            ++c.near_ties;
            flag = " near-tie";
        } else {
            flag = " ARGMAX";
            if (tol.min_argmax_agree >= 1.0) rows_ok = false;
        }
        if (!finite || r > tol.max_rel_l2) {
            flag += " REL_L2";
            rows_ok = false;
        }
        std::vector<float> sorted(ref.row(i), ref.row(i) + ref.n_vocab);
        std::partial_sort(sorted.begin(), sorted.begin() + std::min<size_t>(2, sorted.size()), sorted.end(),
                          std::greater<float>());
        const double gap = sorted.size() > 1 ? double(sorted[0]) - sorted[1] : 0.0;
        t << std::setw(5) << i << "  " << std::scientific << std::setprecision(3) << r << "  " << std::setw(6) << ao
          << " / " << std::setw(6) << ar << "    " << gap << flag << "\n";
    }
    const size_t allowed_ties = ds4::test::allowed_near_ties(c.n_rows);
    const bool ties_ok = c.near_ties <= allowed_ties;
    const double agree = double(c.argmax_agree + c.near_ties) / double(std::max<size_t>(1, c.n_rows));
    const bool agree_ok = agree >= tol.min_argmax_agree;
    c.passed = rows_ok && agree_ok && ties_ok;
    t << "worst rel_l2 " << std::scientific << std::setprecision(3) << c.worst_rel_l2 << " at pos " << c.worst_row
      << " (limit " << tol.max_rel_l2 << "); argmax agreement " << c.argmax_agree << "/" << c.n_rows;
    if (c.near_ties > 0) t << " + " << c.near_ties << " near-ties (at most " << allowed_ties << ")";
    t << " (need " << std::fixed << std::setprecision(0) << tol.min_argmax_agree * 100 << "%)\n";
    c.table = t.str();
    return c;
}

// gtest-friendly: EXPECT_PRED_FORMAT-free, prints the table only on failure.
inline ::testing::AssertionResult logits_match(const Logits& ours, const Logits& ref, const Tolerance& tol,
                                               const std::string& what) {
    const Comparison c = compare_logits(ours, ref, tol);
    if (c.passed) {
        std::printf("%s: worst rel_l2 %.3e, argmax %zu/%zu (+%zu near-ties)\n", what.c_str(), c.worst_rel_l2,
                    c.argmax_agree, c.n_rows, c.near_ties);
        return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << what << " differ beyond tolerance:\n" << c.table;
}

// ---- greedy continuation ------------------------------------------------------

struct Continuation {
    std::vector<int32_t> tokens;  // the generated tokens only
    std::vector<Logits> last_rows;  // the final logits row of each step (1 x n_vocab)
};

// Extends `prompt` by `steps` argmax tokens, re-evaluating the whole sequence
// each step through the differential interface.
inline Continuation greedy_continue(Engine e, const fs::path& model, std::vector<int32_t> seq, int steps,
                                    size_t n_vocab, const fs::path& workdir, const RunOptions& opt = {}) {
    Continuation c;
    for (int s = 0; s < steps; ++s) {
        const Logits l = engine_logits(e, model, seq, n_vocab, workdir, opt);
        const size_t last = l.n_tokens - 1;
        Logits row{1, n_vocab, std::vector<float>(l.row(last), l.row(last) + n_vocab)};
        const auto next = int32_t(l.argmax(last));
        c.tokens.push_back(next);
        c.last_rows.push_back(std::move(row));
        seq.push_back(next);
    }
    return c;
}

inline std::string join_ids(const std::vector<int32_t>& ids) {
    std::string s;
    for (auto id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
    return s;
}

}  // namespace ds4::oracle

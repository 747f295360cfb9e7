#include "synth/tokenizer_source.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "tokenizer/hf_import.h"

namespace ds4 {

namespace fs = std::filesystem;

std::string read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open " + path + " (" + std::strerror(errno) + ").");
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw Error("cannot read " + path + ".");
    return ss.str();
}

std::string find_tokenizer_dir(const std::string& explicit_dir, const std::string& package) {
    if (!explicit_dir.empty()) {
        if (!fs::is_regular_file(fs::path(explicit_dir) / "tokenizer.json"))
            throw Error("tokenizer directory " + explicit_dir + " has no tokenizer.json.");
        return explicit_dir;
    }
    const fs::path rel = fs::path("npm") / "node_modules" / package / "models";
    std::vector<fs::path> candidates;
    if (const char* deps = std::getenv("DS4_DEPS_DIR"); deps && *deps) candidates.push_back(fs::path(deps) / rel);
    // Build directories live in the repository (build-*/ds4-gguf), so the
    // repository's .deps is one level above the executable's folder.
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
            candidates.push_back(dir / ".deps" / rel);
            if (candidates.size() > 4) break;
        }
    }
    candidates.push_back(fs::path(".deps") / rel);
    std::string tried;
    for (const fs::path& c : candidates) {
        if (fs::is_regular_file(c / "tokenizer.json", ec)) return c.string();
        tried += (tried.empty() ? "" : ", ") + c.string();
    }
    throw Error("cannot find the " + package + " tokenizer (tried " + tried +
                "); install it with scripts/setup-tests.sh or pass --tokenizer-dir.");
}

std::string find_llama_template(const std::string& name, const std::string& explicit_file) {
    if (!explicit_file.empty()) return explicit_file;
    const fs::path rel = fs::path("oracle") / "llama.cpp" / "models" / "templates" / name;
    std::vector<fs::path> candidates;
    if (const char* deps = std::getenv("DS4_DEPS_DIR"); deps && *deps) candidates.push_back(fs::path(deps) / rel);
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        int up = 0;
        for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path() && up < 5;
             dir = dir.parent_path(), ++up)
            candidates.push_back(dir / ".deps" / rel);
    }
    candidates.push_back(fs::path(".deps") / rel);
    std::string tried;
    for (const fs::path& c : candidates) {
        if (fs::is_regular_file(c, ec)) return c.string();
        tried += (tried.empty() ? "" : ", ") + c.string();
    }
    throw Error("cannot find llama.cpp's chat template " + name + " (tried " + tried + "); pass --template-file.");
}

GgufTokenizer read_hf_tokenizer(const std::string& explicit_dir, const std::string& package, const std::string& pre,
                                int64_t vocab_size) {
    GgufTokenizer t;
    t.dir = find_tokenizer_dir(explicit_dir, package);
    const std::string tok_json = read_text_file((fs::path(t.dir) / "tokenizer.json").string());
    const fs::path cfg_path = fs::path(t.dir) / "tokenizer_config.json";
    const std::string cfg_json = fs::exists(cfg_path) ? read_text_file(cfg_path.string()) : "";
    t.kv = hf_tokenizer_to_gguf(tok_json, cfg_json, pre, vocab_size);
    for (const auto& [k, v] : t.kv)
        if (k == "tokenizer.ggml.tokens") t.n_tokens = static_cast<int64_t>(v.array_size());
    if (t.n_tokens <= 0) throw Error("the tokenizer in " + t.dir + " has no tokens.");
    return t;
}

}  // namespace ds4

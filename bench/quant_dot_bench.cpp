// Single-thread throughput of dot_row per tensor type, in bytes of weights
// per second: a matrix-vector product over rows of 4096 elements, once with
// the weights resident in L2 and once streamed from DRAM (64 MiB).
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "quant/quant.h"

namespace {

using ds4::GgmlType;

// Random blocks whose half fields are finite: quantize random floats where
// ds4 can, otherwise random bytes with the half scales patched.
std::vector<uint8_t> random_weights(GgmlType t, int64_t n_per_row, int64_t rows) {
    const auto& tr = ds4::ggml_type_traits(t);
    const size_t row_bytes = ds4::ggml_row_bytes(t, n_per_row);
    std::vector<uint8_t> w(row_bytes * rows);
    std::mt19937_64 rng(42);
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    std::vector<size_t> halves;
    switch (t) {
        case GgmlType::Q8_0: halves = {0}; break;
        case GgmlType::Q2_K: halves = {80, 82}; break;
        case GgmlType::Q4_K: case GgmlType::Q5_K: halves = {0, 2}; break;
        case GgmlType::Q6_K: halves = {208}; break;
        case GgmlType::IQ2_XXS: halves = {0}; break;
        default: break;
    }
    if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) {
        std::vector<float> src(n_per_row);
        std::normal_distribution<float> g;
        for (int64_t r = 0; r < rows; ++r) {
            for (auto& v : src) v = g(rng);
            ds4::quantize_row(t, src.data(), w.data() + r * row_bytes, n_per_row);
        }
    } else {
        const uint16_t one = 0x3C00;
        for (size_t b = 0; b < w.size() / tr.block_bytes; ++b)
            for (size_t off : halves) std::memcpy(w.data() + b * tr.block_bytes + off, &one, 2);
    }
    return w;
}

void BM_dot_row(benchmark::State& state, GgmlType t, size_t target_bytes) {
    const int64_t n = 4096;
    const size_t row_bytes = ds4::ggml_row_bytes(t, n);
    const int64_t rows = std::max<int64_t>(1, static_cast<int64_t>(target_bytes / row_bytes));
    const std::vector<uint8_t> w = random_weights(t, n, rows);
    std::vector<float> x(n);
    std::mt19937 rng(7);
    for (auto& v : x) v = std::normal_distribution<float>()(rng);
    for (auto _ : state) {
        float sum = 0;
        for (int64_t r = 0; r < rows; ++r) sum += ds4::dot_row(t, w.data() + r * row_bytes, x.data(), n);
        benchmark::DoNotOptimize(sum);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * rows * static_cast<int64_t>(row_bytes));
    state.counters["elems/s"] = benchmark::Counter(static_cast<double>(rows * n), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_dot_row_ref(benchmark::State& state, GgmlType t) {
    const int64_t n = 4096;
    const size_t row_bytes = ds4::ggml_row_bytes(t, n);
    const int64_t rows = std::max<int64_t>(1, static_cast<int64_t>((256u << 10) / row_bytes));
    const std::vector<uint8_t> w = random_weights(t, n, rows);
    std::vector<float> x(n, 0.5f);
    for (auto _ : state) {
        float sum = 0;
        for (int64_t r = 0; r < rows; ++r) sum += ds4::dot_row_ref(t, w.data() + r * row_bytes, x.data(), n);
        benchmark::DoNotOptimize(sum);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * rows * static_cast<int64_t>(row_bytes));
}

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,   GgmlType::Q2_K,
                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ2_XXS};

int register_all() {
    for (GgmlType t : kTypes) {
        const std::string name(ds4::ggml_type_name(t));
        benchmark::RegisterBenchmark(("dot_row/" + name + "/L2").c_str(), BM_dot_row, t, size_t{256} << 10);
        benchmark::RegisterBenchmark(("dot_row/" + name + "/DRAM").c_str(), BM_dot_row, t, size_t{64} << 20);
        benchmark::RegisterBenchmark(("dot_row_ref/" + name + "/L2").c_str(), BM_dot_row_ref, t);
    }
    return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();

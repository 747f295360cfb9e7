// Shared scaffolding of the CUDA op tests: a CPU backend (the reference) and
// a CUDA backend side by side, a fresh seed per test, weights in host memory
// made resident on the GPU (the CPU reads the same bytes), the same random
// activations on both backends, and a per-row relative-error comparison.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "cuda_test_support.h"
#include "gguf/ggml_type.h"
#include "quant/quant.h"

namespace ds4::cudatest {

// Byte offsets of the half-precision scale fields of one block, which random
// bytes would too often turn into inf/NaN or huge values.
inline std::vector<size_t> half_fields(GgmlType t) {
    switch (t) {
        case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K: return {0, 2};
        case GgmlType::Q2_K: return {80, 82};
        case GgmlType::Q3_K: return {108};
        case GgmlType::Q6_K: return {208};
        default: return {0};
    }
}

class CudaOpsFixture : public ::testing::Test {
protected:
    void SetUp() override {
        DS4_REQUIRE_CUDA_DEVICE();
        seed_ = fresh_seed();
        rng_.seed(seed_);
        trace_.emplace(__FILE__, __LINE__, ds4::test::seed_note(seed_));
        cpu_ = make_cpu_backend(2);
        gpu_ = std::make_unique<CudaBackend>(0);
    }

    // A weight of `matrices` matrices [rows x k] of type t whose bytes the
    // caller fills (*bytes, matrix_bytes * matrices of them) before attach().
    WeightRef new_weight(GgmlType t, int64_t k, int64_t rows, int64_t matrices, std::vector<uint8_t>*& bytes) {
        WeightRef w;
        w.type = t;
        w.ne[0] = k;
        w.ne[1] = rows;
        w.ne[2] = matrices;
        w.row_bytes = ggml_row_bytes(t, k);
        w.matrix_bytes = w.row_bytes * size_t(rows);
        w.name = std::string(ggml_type_name(t)) + " test weight";
        bytes = &buffers_.emplace_back(w.matrix_bytes * size_t(matrices));
        w.data = bytes->data();
        return w;
    }
    // Makes the weight's bytes resident on the GPU.
    void attach(const WeightRef& w) { gpu_->attach_host_region(w.data, w.matrix_bytes * size_t(w.ne[2])); }

    // A weight of `matrices` matrices [rows x k] of type t with random content
    // (quantized random floats, or random blocks with sane scales for the
    // types without a quantizer), resident on the GPU.
    WeightRef weight(GgmlType t, int64_t k, int64_t rows, int64_t matrices = 1) {
        std::vector<uint8_t>* bytes = nullptr;
        WeightRef w = new_weight(t, k, rows, matrices, bytes);
        auto& buf = *bytes;
        const auto& tr = ggml_type_traits(t);
        if (quantize_supported(t)) {
            for (int64_t r = 0; r < rows * matrices; ++r) {
                const auto f = random_floats(rng_, size_t(k));
                quantize_row(t, f.data(), buf.data() + size_t(r) * w.row_bytes, k);
            }
        } else {
            std::uniform_int_distribution<int> byte(0, 255);
            for (auto& b : buf) b = uint8_t(byte(rng_));
            std::uniform_real_distribution<float> scale(0.002f, 0.05f);
            for (size_t blk = 0; blk < buf.size() / tr.block_bytes; ++blk)
                for (size_t off : half_fields(t)) {
                    const uint16_t h = fp32_to_fp16(scale(rng_));
                    buf[blk * tr.block_bytes + off] = uint8_t(h & 0xFF);
                    buf[blk * tr.block_bytes + off + 1] = uint8_t(h >> 8);
                }
        }
        attach(w);
        return w;
    }

    WeightRef f32_vector(const std::vector<float>& v) {
        std::vector<uint8_t>* bytes = nullptr;
        WeightRef w = new_weight(GgmlType::F32, int64_t(v.size()), 1, 1, bytes);
        w.name = "test vector";
        std::memcpy(bytes->data(), v.data(), sizeof(float) * v.size());
        attach(w);
        return w;
    }

    // The same values on both backends.
    std::pair<Tensor, Tensor> same(const std::vector<float>& v, int64_t rows, int64_t cols) {
        Tensor c = cpu_->alloc(rows, cols), g = gpu_->alloc(rows, cols);
        cpu_->upload(c, v.data());
        gpu_->upload(g, v.data());
        return {c, g};
    }
    // The same random activations on both backends.
    std::pair<Tensor, Tensor> pair(int64_t rows, int64_t cols, float lo = -1.0f, float hi = 1.0f) {
        return same(random_floats(rng_, size_t(rows * cols), lo, hi), rows, cols);
    }
    std::pair<Tensor, Tensor> zeros(int64_t rows, int64_t cols) {
        return {cpu_->alloc(rows, cols), gpu_->alloc(rows, cols)};
    }
    std::pair<IntArray, IntArray> ints(const std::vector<int32_t>& v) {
        return {cpu_->ints(v.data(), int64_t(v.size())), gpu_->ints(v.data(), int64_t(v.size()))};
    }

    std::vector<float> host(const Tensor& g) {
        std::vector<float> v(size_t(g.size()));
        gpu_->download(g, v.data());
        return v;
    }
    static std::vector<int32_t> host_ints(Backend& be, const IntArray& a) {
        std::vector<int32_t> v(size_t(a.n));
        be.download_ints(a, v.data());
        return v;
    }

    // A CPU routing decision, copied to the GPU, so both run the same experts.
    Routing to_gpu(const Routing& r) {
        Routing g;
        g.n_used = r.n_used;
        g.rows = r.rows;
        g.experts = gpu_->ints(r.experts.data, r.experts.n);
        g.weights = gpu_->alloc(r.weights.rows, r.weights.cols);
        gpu_->upload(g.weights, r.weights.data);
        return g;
    }

    // The routed-expert FFN product by product on the CPU, as a fast GPU path
    // promises it: each token's row of x (already rounded as that path
    // rounds it), each chosen expert's gate and up rows (gate times its scale
    // gs[e]), SwiGLU, the hidden row through `round_h`, down, weighted by the
    // routing weight times ds[e], summed in slot order.
    Tensor moe_reference(const std::vector<float>& x_rounded, int64_t T, const Routing& r, const WeightRef& gate,
                         const WeightRef& up, const WeightRef& down, const std::vector<float>& gs,
                         const std::vector<float>& ds,
                         const std::function<std::vector<float>(const std::vector<float>&)>& round_h) {
        const int64_t E = gate.ne[0], F = gate.ne[1];
        const auto experts = host_ints(*cpu_, r.experts);
        Tensor ref = cpu_->alloc(T, E), xrow = cpu_->alloc(1, E), g = cpu_->alloc(1, F), u = cpu_->alloc(1, F),
               hrow = cpu_->alloc(1, F), d = cpu_->alloc(1, E);
        for (int64_t tok = 0; tok < T; ++tok) {
            std::copy_n(x_rounded.data() + tok * E, E, xrow.data);
            std::fill_n(ref.data + tok * E, E, 0.0f);
            for (int64_t j = 0; j < r.n_used; ++j) {
                const int32_t e = experts[size_t(tok * r.n_used + j)];
                cpu_->matmul(gate, xrow, g, e);
                cpu_->matmul(up, xrow, u, e);
                std::vector<float> hv(static_cast<size_t>(F));
                for (int64_t i = 0; i < F; ++i) {
                    const float gv = g.data[i] * gs[size_t(e)];
                    hv[size_t(i)] = gv / (1.0f + std::exp(-gv)) * u.data[i];
                }
                const auto hr = round_h(hv);
                std::copy(hr.begin(), hr.end(), hrow.data);
                cpu_->matmul(down, hrow, d, e);
                const float wgt = r.weights.data[tok * r.n_used + j] * ds[size_t(e)];
                for (int64_t c = 0; c < E; ++c) ref.data[tok * E + c] += d.data[c] * wgt;
            }
        }
        return ref;
    }

    // Every row of the CUDA result within `tol` relative L2 error of the CPU's.
    ::testing::AssertionResult close(const Tensor& cpu, const Tensor& gpu, double tol, const std::string& what) {
        const auto g = host(gpu);
        for (int64_t r = 0; r < cpu.rows; ++r) {
            const double e = rel_l2(g.data() + r * cpu.cols, cpu.data + r * cpu.cols, size_t(cpu.cols));
            if (!(e <= tol))
                return ::testing::AssertionFailure() << what << ": row " << r << " relative error " << e << " > " << tol
                                                     << " (cpu[0]=" << cpu.data[r * cpu.cols]
                                                     << ", cuda[0]=" << g[size_t(r * cpu.cols)] << ")";
        }
        return ::testing::AssertionSuccess();
    }

    uint64_t seed_ = 0;
    std::mt19937_64 rng_;
    std::optional<::testing::ScopedTrace> trace_;
    std::unique_ptr<Backend> cpu_;
    std::unique_ptr<CudaBackend> gpu_;
    std::vector<std::vector<uint8_t>> buffers_;
};

}  // namespace ds4::cudatest

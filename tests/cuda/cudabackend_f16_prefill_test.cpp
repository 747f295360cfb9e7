// The tensor-core prefill (CudaOptions::f16_prefill, the engine's default;
// --exact turns it off) against the rule it promises (mma_gemm.cu): each
// weight is its decoded value rounded to f16; each activation row is divided
// by the power of two 2^e that puts its largest magnitude in [2^14, 2^15),
// rounded to f16, and the f32 sum is multiplied by 2^e again. So the GPU
// result must equal the CPU's float product of the rounded operands (an F16
// copy of the weight, the rounded rows) to float rounding, which catches a
// wrong fragment layout, tile edge, scale or decode; and it must differ from
// the product of the unrounded operands, or the f16 path did not run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_ops.h"
#include "cuda_ops_fixture.h"
#include "quant/quant.h"

namespace ds4 {
namespace {

using cudatest::random_floats;

// Rows of `cols` values as the tensor cores see them (see the file's comment).
std::vector<float> round_rows_to_f16(const std::vector<float>& x, int64_t cols) {
    std::vector<float> out(x.size());
    for (size_t r = 0; r < x.size() / size_t(cols); ++r) {
        const float* row = x.data() + r * size_t(cols);
        float m = 0.0f;
        for (int64_t i = 0; i < cols; ++i) m = std::max(m, std::fabs(row[i]));
        float s = 1.0f;
        if (m > 0.0f && std::isfinite(m)) {
            int e = 0;
            std::frexp(m, &e);
            s = std::ldexp(1.0f, std::max(e - 15, -100));
        }
        for (int64_t i = 0; i < cols; ++i)
            out[r * size_t(cols) + size_t(i)] = fp16_to_fp32(fp32_to_fp16(row[i] / s)) * s;
    }
    return out;
}

class CudaF16Prefill : public cudatest::CudaOpsFixture {
protected:
    void SetUp() override {
        CudaOpsFixture::SetUp();
        if (IsSkipped()) return;
        CudaOptions o;
        o.f16_prefill = true;
        gpu_ = std::make_unique<CudaBackend>(o);
    }
    // An F16 weight holding w's decoded values rounded to f16 (the CPU reads it).
    WeightRef f16_copy(const WeightRef& w) {
        std::vector<uint8_t>* bytes = nullptr;
        WeightRef h = new_weight(GgmlType::F16, w.ne[0], w.ne[1], w.ne[2], bytes);
        std::vector<float> row(size_t(w.ne[0]));
        for (int64_t r = 0; r < w.ne[1] * w.ne[2]; ++r) {
            dequantize_row(w.type, w.data + size_t(r) * w.row_bytes, row.data(), w.ne[0]);
            fp32_to_fp16_row(row.data(), reinterpret_cast<uint16_t*>(bytes->data() + size_t(r) * h.row_bytes),
                             w.ne[0]);
        }
        return h;
    }
    // Activation rows of every magnitude a prefill meets: each row random
    // times 2^j, j in [-20, 20]; one all-zero row; one row with a value f16
    // cannot hold (3e5) unless the row is scaled first.
    std::vector<float> activations(int64_t rows, int64_t cols) {
        auto v = random_floats(rng_, size_t(rows * cols), -1.0f, 1.0f);
        std::uniform_int_distribution<int> pow2(-20, 20);
        for (int64_t r = 0; r < rows; ++r) {
            const float s = std::ldexp(1.0f, pow2(rng_));
            for (int64_t i = 0; i < cols; ++i) v[size_t(r * cols + i)] *= s;
        }
        std::uniform_int_distribution<int64_t> row(0, rows - 1), col(0, cols - 1);
        const int64_t zero = row(rng_);
        std::fill_n(v.begin() + zero * cols, cols, 0.0f);
        int64_t big = row(rng_);
        if (big == zero) big = (big + 1) % rows;
        v[size_t(big * cols + col(rng_))] = 3.0e5f;
        return v;
    }
    std::pair<Tensor, Tensor> cpu_gpu(const std::vector<float>& cpu_values, const std::vector<float>& gpu_values,
                                      int64_t rows, int64_t cols) {
        Tensor c = cpu_->alloc(rows, cols), g = gpu_->alloc(rows, cols);
        cpu_->upload(c, cpu_values.data());
        gpu_->upload(g, gpu_values.data());
        return {c, g};
    }
};

class CudaF16PrefillTyped : public CudaF16Prefill, public ::testing::WithParamInterface<GgmlType> {};

TEST_P(CudaF16PrefillTyped, MatmulIsTheFloatProductOfTheRoundedOperands) {
    const GgmlType t = GetParam();
    ASSERT_TRUE(cuda::gemm_f16_supported(t, 256));
    const int64_t qk = ggml_type_traits(t).block_elems;
    // k = 352 for 32-element blocks: a main-loop step of 64 half past the end.
    std::vector<int64_t> ks = {qk >= 256 ? 768 : 512};
    if (qk <= 32) ks.push_back(352);
    for (int64_t k : ks) {
        const int64_t rows = 67;  // one whole block of 64 weight rows and 3 more
        const WeightRef w = weight(t, k, rows, 3);
        const WeightRef w16 = f16_copy(w);
        // Prefill sizes: above kMatvecMaxTokens; one tile and a bit, two, three partial.
        for (int64_t T : {65, 128, 161}) {
            for (int64_t m : {0, 2}) {
                const auto x = activations(T, k);
                auto [xr, xg] = cpu_gpu(round_rows_to_f16(x, k), x, T, k);
                auto [yc, yg] = zeros(T, rows);
                cpu_->matmul(w16, xr, yc, m);
                gpu_->matmul(w, xg, yg, m);
                const std::string what = std::string(ggml_type_name(t)) + " k=" + std::to_string(k) +
                                         " T=" + std::to_string(T) + " matrix " + std::to_string(m);
                EXPECT_TRUE(close(yc, yg, 1e-5, what + " against the product of the rounded operands"));
                // The unrounded product is ~1e-4 away on every row that is not zero.
                cpu_->upload(xr, x.data());
                cpu_->matmul(w, xr, yc, m);
                EXPECT_FALSE(close(yc, yg, 1e-5, what)) << what << ": the f16 path did not run";
            }
        }
    }
}

std::vector<GgmlType> f16_types() {
    std::vector<GgmlType> out;
    for (GgmlType t : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                       GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                       GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ2_XXS, GgmlType::IQ4_XS})
        out.push_back(t);
    return out;
}

INSTANTIATE_TEST_SUITE_P(Types, CudaF16PrefillTyped, ::testing::ValuesIn(f16_types()),
                         [](const ::testing::TestParamInfo<GgmlType>& i) {
                             return std::string(ggml_type_name(i.param));
                         });

TEST_F(CudaF16Prefill, F32AndBf16WeightsKeepTheFloatPath) {
    EXPECT_FALSE(cuda::gemm_f16_supported(GgmlType::F32, 256));
    EXPECT_FALSE(cuda::gemm_f16_supported(GgmlType::BF16, 256));
    EXPECT_FALSE(cuda::gemm_f16_supported(GgmlType::F16, 100));  // rows of whole 32-element chunks only
    for (GgmlType t : {GgmlType::F32, GgmlType::BF16}) {
        const int64_t k = 256, rows = 40, T = 70;
        const WeightRef w = weight(t, k, rows);
        auto [xc, xg] = pair(T, k);
        auto [yc, yg] = zeros(T, rows);
        cpu_->matmul(w, xc, yc, 0);
        gpu_->matmul(w, xg, yg, 0);
        EXPECT_TRUE(close(yc, yg, 1e-5, std::string(ggml_type_name(t)) + " prefill in FP32"));
    }
}

// The routed experts of a prefill-sized batch (more than 512 pairs: the
// grouped path), every expert chosen by more than one tile's worth of pairs
// and some by few: the CPU reference product by product, with x rounded per
// token row and h per pair row, as the grouped kernel rounds them.
TEST_F(CudaF16Prefill, MoeRoundsTheInputAndTheHiddenRows) {
    const int64_t E = 512, F = 768, n_exp = 8, n_used = 6, T = 100;
    const std::pair<GgmlType, GgmlType> kinds[] = {{GgmlType::Q4_K, GgmlType::Q6_K}, {GgmlType::Q8_0, GgmlType::Q8_0}};
    for (const auto& [t, td] : kinds) {
        const WeightRef gate = weight(t, E, F, n_exp), up = weight(t, E, F, n_exp), down = weight(td, F, E, n_exp);
        const WeightRef gate16 = f16_copy(gate), up16 = f16_copy(up), down16 = f16_copy(down);
        const auto gs_v = random_floats(rng_, n_exp, 0.5f, 2.0f), ds_v = random_floats(rng_, n_exp, 0.5f, 2.0f);
        const WeightRef gs = f32_vector(gs_v), ds = f32_vector(ds_v);
        const auto x = activations(T, E);
        auto [lc, lg] = pair(T, n_exp, -3.0f, 3.0f);
        const Routing r = cpu_->route_softmax_topk(lc, n_used, true, 0.0f);
        auto [xc, xg] = cpu_gpu(x, x, T, E);
        auto [oc, og] = zeros(T, E);
        gpu_->moe_swiglu(xg, to_gpu(r), gate, up, down, &gs, nullptr, &ds, og);

        const auto round_h = [F](const std::vector<float>& h) { return round_rows_to_f16(h, F); };
        const Tensor ref = moe_reference(round_rows_to_f16(x, E), T, r, gate16, up16, down16, gs_v, ds_v, round_h);
        // Float rounding (the GPU sums gate and up in another order) may move
        // an element of h across a rounding boundary of f16: one step of
        // 2^-11 of that element. The rows scaled by up to 2^20 make h (a
        // product of two such sums through SiLU) heavy-tailed, a few elements
        // carrying most of a row, so one step on the largest moves the row by
        // up to ~2^-11 (2.5e-4 measured on the H200 against a first bound of
        // 1e-4), and twice that over the gate and up roundings: 2^-10. A wrong
        // tile, expert or scale is ~1e-1.
        const std::string what = std::string(ggml_type_name(t)) + "/" + std::string(ggml_type_name(td)) + " moe";
        EXPECT_TRUE(close(ref, og, 1e-3, what + " against the product of the rounded operands"));
        cpu_->moe_swiglu(xc, r, gate, up, down, &gs, nullptr, &ds, oc);
        EXPECT_FALSE(close(oc, og, 1e-5, what)) << what << ": the f16 path did not run";
    }
}


// gemm_frag.cu (Q4_K and Q6_K weights decoded into the mma fragments; the
// backend takes it with DS4_CUDA_GEMM_FRAG=1) called directly, so it is tested
// whatever the switch says: tiles of 1 to 64 tokens over three matrices (an
// idle entry too), and the plain token-major form with a partial last tile.
// Each output against the float product of the rounded operands, within
// 1e-5 of the sum of its terms' magnitudes (f32 accumulation of k = 768
// terms stays far inside); a wrong fragment, nibble, scale or tile is off
// by the size of the terms.
TEST_F(CudaF16Prefill, FragmentKernelIsTheFloatProductOfTheRoundedOperands) {
    for (const GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K}) {
        SCOPED_TRACE(ggml_type_name(type));
        const int64_t k = 768, rows = 67, n_mat = 3, T = 161;
        const WeightRef w = weight(type, k, rows, n_mat);
        ASSERT_TRUE(cuda::gemm_frag_usable(type, w.data, w.matrix_bytes, w.row_bytes, k));
        // The weights as the kernel rounds them: decoded, then f16.
        std::vector<float> w16(size_t(n_mat * rows * k));
        for (int64_t r = 0; r < n_mat * rows; ++r) {
            dequantize_row(type, w.data + size_t(r) * w.row_bytes, w16.data() + r * k, k);
            for (int64_t i = 0; i < k; ++i) w16[size_t(r * k + i)] = fp16_to_fp32(fp32_to_fp16(w16[size_t(r * k + i)]));
        }
        const auto x = activations(T, k);
        const auto xr = round_rows_to_f16(x, k);
        // (matrix, first token, tokens): every partial n-tile count, an idle entry.
        const std::vector<int32_t> tiles = {0, 0, 64, 2, 64, 1, 1, 65, 9, 2, 74, 33, 0, 107, 0, 1, 107, 20, 0, 127, 34};
        const int64_t n_tiles = int64_t(tiles.size() / 3);

        const size_t w_bytes = w.matrix_bytes * size_t(n_mat);
        const int64_t ld_h = cuda::half_row_stride(k);
        uint8_t* d_w = nullptr;
        float *d_x = nullptr, *d_scale = nullptr, *d_y = nullptr;
        uint16_t* d_xh = nullptr;
        int32_t* d_tiles = nullptr;
        ASSERT_EQ(cudaMalloc(&d_w, w_bytes), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&d_x, sizeof(float) * x.size()), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&d_xh, sizeof(uint16_t) * size_t(T * ld_h)), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&d_scale, sizeof(float) * size_t(T)), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&d_y, sizeof(float) * size_t(T * rows)), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&d_tiles, sizeof(int32_t) * tiles.size()), cudaSuccess);
        cudaMemcpy(d_w, w.data, w_bytes, cudaMemcpyHostToDevice);
        cudaMemcpy(d_x, x.data(), sizeof(float) * x.size(), cudaMemcpyHostToDevice);
        cudaMemcpy(d_tiles, tiles.data(), sizeof(int32_t) * tiles.size(), cudaMemcpyHostToDevice);
        cuda::rows_to_half(d_x, k, nullptr, T, k, d_xh, ld_h, d_scale, nullptr);

        auto check = [&](const std::vector<float>& y, const std::vector<int32_t>& tl, const std::string& what) {
            int bad = 0;
            for (size_t i = 0; i < tl.size() / 3; ++i)
                for (int64_t n = 0; n < tl[3 * i + 2]; ++n) {
                    const int64_t tok = tl[3 * i + 1] + n;
                    for (int64_t m = 0; m < rows; ++m) {
                        const float* wr = w16.data() + (int64_t(tl[3 * i]) * rows + m) * k;
                        double ref = 0.0, mag = 0.0;
                        for (int64_t j = 0; j < k; ++j) {
                            ref += double(wr[j]) * double(xr[size_t(tok * k + j)]);
                            mag += std::fabs(double(wr[j]) * double(xr[size_t(tok * k + j)]));
                        }
                        const double got = y[size_t(tok * rows + m)];
                        if (std::fabs(got - ref) > 1e-5 * mag + 1e-30 && bad++ < 5)
                            ADD_FAILURE() << what << ": token " << tok << ", row " << m << ": " << got << " vs " << ref;
                    }
                }
            EXPECT_EQ(bad, 0) << what;
        };
        std::vector<float> y(size_t(T * rows));
        cudaMemset(d_y, 0, sizeof(float) * y.size());
        cuda::gemm_frag(type, d_w, w.matrix_bytes, w.row_bytes, k, rows, d_tiles, n_tiles, T, d_xh, ld_h, d_scale,
                        d_y, rows, nullptr);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        cudaMemcpy(y.data(), d_y, sizeof(float) * y.size(), cudaMemcpyDeviceToHost);
        check(y, tiles, "tile list");
        // Token-major: matrix 0, tokens [0, T) in tiles of 64 (the last of 33).
        cuda::gemm_frag(type, d_w, w.matrix_bytes, w.row_bytes, k, rows, nullptr, 0, T, d_xh, ld_h, d_scale, d_y,
                        rows, nullptr);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        cudaMemcpy(y.data(), d_y, sizeof(float) * y.size(), cudaMemcpyDeviceToHost);
        check(y, {0, 0, int32_t(T)}, "token-major");
        for (void* p : {static_cast<void*>(d_w), static_cast<void*>(d_x), static_cast<void*>(d_xh),
                        static_cast<void*>(d_scale), static_cast<void*>(d_y), static_cast<void*>(d_tiles)})
            cudaFree(p);
    }
}

// ---- prefill attention on the tensor cores (attention_tc.cu) ----------------

// x rounded to TF32 as cvt.rna does: to nearest on the 13 dropped bits, ties
// away from zero.
float round_tf32(float x) {
    uint32_t u = 0;
    std::memcpy(&u, &x, sizeof u);
    u = (u + 0x1000u) & 0xffffe000u;
    std::memcpy(&x, &u, sizeof x);
    return x;
}

// Mixed batches (one slot reads a chunk while the others decode a token),
// rows in order or shuffled (a warp's tokens then come from different
// sequences), over every head grouping the kernel takes. The rule: the
// CPU's float attention over q * scale, K and V rounded to TF32 gives the
// result up to the rounding of the softmax weights (2^-11 relative each),
// so 1e-3; a wrong mask, slot, fragment or rescale is off by far more on
// the rows with few keys. And it is not the FP32 kernels' result.
TEST_F(CudaF16Prefill, TensorCoreAttentionIsTheFloatAttentionOfTf32Operands) {
    constexpr int kSlots = 3;
    struct Heads {
        int n_head, n_kv, d;
    };
    double worst_unrounded = 0.0;
    for (const Heads hd : {Heads{8, 2, 64}, Heads{32, 4, 128}, Heads{16, 1, 128}, Heads{8, 8, 128}, Heads{32, 8, 64}})
        for (int64_t ctx : {48, 1500}) {
            const int d = hd.d, nh = hd.n_head;
            const float scale = 1.0f / std::sqrt(float(d));
            const AttentionParams p{nh, hd.n_kv, d, d, scale};
            ASSERT_TRUE(cuda::attention_tc_shape(p, nullptr, int64_t(hd.n_kv) * d, nullptr, int64_t(hd.n_kv) * d));
            const AttentionParams p_cpu{nh, hd.n_kv, d, d, 1.0f};  // q arrives scaled and rounded
            SCOPED_TRACE("heads " + std::to_string(nh) + "/" + std::to_string(hd.n_kv) + ", dim " + std::to_string(d) +
                         ", ctx " + std::to_string(ctx));
            const int64_t kvd = int64_t(hd.n_kv) * d, qd = int64_t(nh) * d;
            auto [kc_c, kc_g] = zeros(kSlots * ctx, kvd);
            auto [vc_c, vc_g] = zeros(kSlots * ctx, kvd);
            auto [kr_c, kr_g] = zeros(kSlots * ctx, kvd);  // kr_c: the rounded caches (kr_g unused)
            auto [vr_c, vr_g] = zeros(kSlots * ctx, kvd);
            int64_t past[kSlots] = {0, 0, 0};
            const std::vector<int64_t> steps = ctx < 100 ? std::vector<int64_t>{13, 1, 20, 2, 5}
                                                         : std::vector<int64_t>{1100, 1, 37, 1, 300, 17};
            for (size_t si = 0; si < steps.size(); ++si) {
                std::vector<int32_t> positions, slots;
                int64_t longest = 0;
                for (int s = 0; s < kSlots; ++s) {
                    const int64_t n = s == int(si % kSlots) ? steps[si] : (past[s] + 1 < ctx ? 1 : 0);
                    int64_t taken = 0;
                    for (int64_t i = 0; i < n && past[s] < ctx; ++i, ++taken) {
                        positions.push_back(int32_t(past[s]++));
                        slots.push_back(s);
                    }
                    longest = std::max(longest, taken);
                }
                if (si % 2 == 1) {  // shuffled rows
                    std::vector<size_t> order(positions.size());
                    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
                    std::shuffle(order.begin(), order.end(), rng_);
                    std::vector<int32_t> ps, ss;
                    for (size_t i : order) {
                        ps.push_back(positions[i]);
                        ss.push_back(slots[i]);
                    }
                    positions.swap(ps);
                    slots.swap(ss);
                }
                const int64_t T = int64_t(positions.size());
                const auto k = random_floats(rng_, size_t(T * kvd), -2.0f, 2.0f);
                const auto v = random_floats(rng_, size_t(T * kvd), -1.0f, 1.0f);
                const auto q = random_floats(rng_, size_t(T * qd), -2.0f, 2.0f);
                std::vector<float> k_r(k), v_r(v), q_r(q);
                for (float& x : k_r) x = round_tf32(x);
                for (float& x : v_r) x = round_tf32(x);
                for (float& x : q_r) x = round_tf32(x * scale);
                auto [kc, kg] = cpu_gpu(k, k, T, kvd);
                auto [vc, vg] = cpu_gpu(v, v, T, kvd);
                auto [qc, qg] = cpu_gpu(q, q, T, qd);
                auto [kcr, unused_k] = cpu_gpu(k_r, k_r, T, kvd);
                auto [vcr, unused_v] = cpu_gpu(v_r, v_r, T, kvd);
                auto [qcr, unused_q] = cpu_gpu(q_r, q_r, T, qd);
                const CacheRows rc{cpu_->ints(positions.data(), T), cpu_->ints(slots.data(), T), ctx};
                // The hint that picks the kernel: the whole batch, so every step takes the tensor cores.
                const CacheRows rg{gpu_->ints(positions.data(), T), gpu_->ints(slots.data(), T), ctx, std::max(T, cuda::kTcMinSeqRows)};
                cpu_->kv_store(kc_c, vc_c, kc, vc, rc);
                cpu_->kv_store(kr_c, vr_c, kcr, vcr, rc);
                gpu_->kv_store(kc_g, vc_g, kg, vg, rg);
                auto [oc, og] = zeros(T, qd);
                auto [orc, unused_o] = zeros(T, qd);
                cpu_->attention(qcr, kr_c, vr_c, rc, p_cpu, orc);
                cpu_->attention(qc, kc_c, vc_c, rc, p, oc);
                gpu_->attention(qg, kc_g, vc_g, rg, p, og);
                const std::string what = "step " + std::to_string(si) + " T=" + std::to_string(T) + " longest " +
                                         std::to_string(longest);
                EXPECT_TRUE(close(orc, og, 1e-3, what + " against the attention of the rounded operands"));
                const auto g = host(og);
                for (int64_t r = 0; r < T; ++r)
                    worst_unrounded = std::max(worst_unrounded, cudatest::rel_l2(g.data() + r * qd, oc.data + r * qd, size_t(qd)));
            }
        }
    // The FP32 kernels stay within ~1e-6 of the CPU: farther means the tensor cores ran.
    EXPECT_GT(worst_unrounded, 1e-5) << "the tensor-core attention did not run";
}

}  // namespace
}  // namespace ds4

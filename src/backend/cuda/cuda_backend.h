// The CUDA backend: weights resident in device memory (one allocation per
// model-map region), activations in device memory between ops, every op a
// kernel on one stream of the backend's own. Decode steps can be recorded
// as a CUDA graph and replayed (begin_capture / end_capture / replay).
// Semantics are the CPU backend's, op for op; tests/cuda compares the two.
#pragma once

#include <cublas_v2.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "models/deepseek4/dsv4_ops.h"
#include "models/glm_dsa/glm_dsa_ops.h"
#include "backend/cuda/l2_ahead.h"
#include "backend/cuda/op_profile.h"
#include "backend/cuda/step_timing.h"

namespace ds4 {

struct CudaOptions {
    int device = 0;
    // Weights stay in the mapped file, page-locked and mapped into the
    // device's address space (cudaHostRegister), instead of one device copy
    // per region: every product then reads them over the host link.
    bool host_weights = false;
    // Decode products round their activations to 8 bits per block of 32 and
    // multiply with integer dot products (q8_dot.cuh), as llama.cpp's CUDA
    // backend does: several times fewer instructions per weight. Off: float
    // activations, the CPU backend's semantics to float rounding (--exact,
    // and what the CPU-vs-GPU op tests hold).
    bool int8_activations = false;
    // Prefill products (more than kMatvecMaxTokens rows) on the tensor cores:
    // weights decoded to f16 inside the GEMM, activations rounded to f16 after
    // a power-of-two scale per row, f32 sums (mma_gemm.cu). Off: weights
    // decoded to float and FP32 cuBLAS, the CPU's semantics to float rounding
    // (--exact, and what the CPU-vs-GPU model tests hold).
    bool f16_prefill = false;
};

class CudaBackend final : public Backend, public Dsv4Ops, public GlmDsaOps {
public:
    // Binds to CUDA device `device`; throws ds4::Error when there is none.
    explicit CudaBackend(int device = 0);
    explicit CudaBackend(const CudaOptions& options);
    ~CudaBackend() override;
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    std::string name() const override { return "cuda"; }
    uint64_t available_memory() const override;

    // One cudaMalloc + copy per region of the map (or one registration per
    // region with host_weights); logs "cuda: N regions, X GiB resident" (or
    // "... in registered host memory") to stderr.
    void attach_weights(const ModelMap& map) override;
    // Makes [host, host + bytes) resident as one device allocation; WeightRefs
    // pointing into it are read from the copy. (attach_weights uses it per
    // region; tests use it for weights built in memory.)
    void attach_host_region(const uint8_t* host, uint64_t bytes);
    // An expert cache's slots: a region like the map's (device copy, or
    // registered pages with host_weights), rewritten by write_weights.
    void attach_buffer(const uint8_t* host, uint64_t bytes) override { attach_host_region(host, bytes); }
    void write_weights(uint8_t* dst, const uint8_t* src, uint64_t bytes) override;
    uint8_t* alloc_host_staging(uint64_t bytes) override;
    void free_host_staging(uint8_t* p) override;
    uint64_t expert_window_bytes(uint64_t bytes) const override;
    // The windows' address range, read where it lies (device_ptr passes its
    // addresses through); forgotten when the windows go.
    void attach_window_range(const uint8_t* base, uint64_t bytes);
    void forget_window_range(const uint8_t* base);
    // Expires when this backend is destroyed (for objects it made that may
    // outlive it).
    std::weak_ptr<int> lifetime() const { return lifetime_; }
    uint64_t resident_bytes() const;
    // The device copy of `bytes` bytes at host address p; throws naming the
    // weight when they are not inside one resident region.
    const uint8_t* device_ptr(const uint8_t* p, uint64_t bytes, const std::string& what) const;

    Tensor alloc(int64_t rows, int64_t cols) override;
    void upload(Tensor& t, const float* host) override;
    void download(const Tensor& t, float* host) override;
    void synchronize() override;
    void copy_in(void* dst, const void* staged, uint64_t bytes) override;
    void copy_out(void* staged, const void* src, uint64_t bytes) override;
    void download_aside(const Tensor& t, float* host) override;
    // download_aside's page-locked halves, each this size.
    static constexpr size_t kAsideChunkBytes = size_t{16} << 20;
    IntArray alloc_ints(int64_t n) override;
    void upload_ints(IntArray& a, const int32_t* host) override;
    void download_ints(const IntArray& a, int32_t* host) override;

    // Not while profiling: the per-op events cannot see inside a recording.
    bool can_capture() const override { return !profile_.enabled(); }
    void begin_capture() override;
    std::shared_ptr<void> end_capture() override;
    void replay(const std::shared_ptr<void>& recording) override;

    void get_rows(const WeightRef& table, const IntArray& ids, Tensor& out) override;
    void matmul(const WeightRef& w, const Tensor& x, Tensor& y, int64_t matrix = 0) override;
    // One split of x (dense_split_mma.cu) for every product that takes it.
    void matmuls(const Tensor& x, const WeightRef* const* w, Tensor* const* y, int n) override;
    void prefetch(const WeightRef* const* w, int n) override;
    void rms_norm(const Tensor& x, const WeightRef* weight, float eps, int64_t group, Tensor& y) override;
    void rope(Tensor& x, int head_dim, const IntArray& positions, const RopeParams& p) override;
    void kv_store(Tensor& k_cache, Tensor& v_cache, const Tensor& k, const Tensor& v, const CacheRows& rows) override;
    void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const CacheRows& rows,
                   const AttentionParams& p, Tensor& out) override;
    void gather_rows(const Tensor& src, const IntArray& rows, Tensor& dst) override;
    void top_k_rows(const Tensor& x, int k, Tensor& values, IntArray& ids, IntArray& first_bad) override;
    void copy(const Tensor& src, Tensor& dst) override;
    void add(const Tensor& a, const Tensor& b, Tensor& out) override;
    void add_rms_norm(Tensor& x, const Tensor& delta, const WeightRef* weight, float eps, Tensor& y) override;
    void qk_norm_rope(Tensor& q, Tensor& k, const WeightRef& q_norm, const WeightRef& k_norm, float eps, int head_dim,
                      const IntArray& positions, const RopeParams& p) override;
    void qk_norm_rope_store(Tensor& q, Tensor& k, const Tensor& v, const WeightRef& q_norm, const WeightRef& k_norm,
                            float eps, int head_dim, const RopeParams& p, Tensor& k_cache, Tensor& v_cache,
                            const CacheRows& rows) override;
    void scale(Tensor& x, float s) override;
    void mul_row(Tensor& x, const WeightRef& w) override;
    void add_row(Tensor& x, const WeightRef& b) override;
    void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) override;
    void count_experts(const Routing& routing, IntArray& counts) override;
    Routing route_softmax_topk(const Tensor& logits, int n_used, bool norm, float w_scale) override;
    Routing router_softmax_topk(const WeightRef& router, const Tensor& x, Tensor& logits, int n_used, bool norm,
                                float w_scale) override;
    void moe_swiglu(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                    const WeightRef& down, const WeightRef* gate_scale, const WeightRef* up_scale,
                    const WeightRef* down_scale, Tensor& out) override;

    // DeepSeek V4 ops (cuda_backend_deepseek4.cpp; routing and MoE in cuda_moe.cpp).
    void rope_partial(Tensor& x, int head_dim, int offset, const IntArray& positions, const RopeParams& p,
                      bool inverse) override;
    void hc_mixes(const Tensor& mixes, const WeightRef& scale, const WeightRef& base, const HcParams& p, Tensor& pre,
                  Tensor* post, Tensor* comb) override;
    void hc_collapse(const Tensor& x, const Tensor& pre, Tensor& out) override;
    void hc_expand(const Tensor& y, const Tensor& residual, const Tensor& post, const Tensor& comb,
                   Tensor& out) override;
    void matmul_grouped(const WeightRef& w, const Tensor& x, Tensor& y) override;
    void swiglu_clamp(const Tensor& gate, const Tensor& up, float limit, Tensor& out) override;
    Routing route_sqrt_softplus(const Tensor& logits, const WeightRef* bias, const WeightRef* hash,
                                const IntArray* tokens, int n_used, bool norm, float w_scale) override;
    void moe_swiglu_clamp(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                          const WeightRef& down, float limit, Tensor& out) override;
    void broadcast_streams(const Tensor& x, Tensor& streams) override;
    Dsv4Rows plan_rows(const CacheRows& batch, int64_t n) override;
    IntArray plan_ring(const Dsv4Rows& rows, int64_t ring) override;
    Dsv4CompressorPlan plan_compressor(const Dsv4Rows& rows, int ratio, bool overlap, int64_t cache_rows) override;
    void compress_pool(const Tensor& state_kv, const Tensor& state_score, const Tensor& kv, const Tensor& score,
                       const IntArray& sources, int per_block, bool overlap, Tensor& out) override;
    void scatter_rows(const Tensor& src, const IntArray& dst_rows, Tensor& dst) override;
    RowSets indexer_topk(const Tensor& q, const Tensor& w, const Tensor& keys, const RowSets& visible,
                         int64_t top_k) override;
    void attention_window_sink(const Tensor& q, const Tensor& k, const Tensor& window, const Dsv4Rows& rows,
                               int64_t n_swa, const Tensor* comp, const RowSets* comp_rows, const WeightRef& sinks,
                               const AttentionParams& p, Tensor& out) override;

    // GLM-5 (glm-dsa) ops (cuda_backend_glm_dsa.cpp).
    void cache_store(Tensor& cache, const Tensor& rows, const CacheRows& where) override;
    RowSets plan_causal(const CacheRows& where, int64_t n) override;
    void layer_norm(const Tensor& x, const WeightRef* weight, const WeightRef* bias, float eps, Tensor& y) override;
    void head_columns(const Tensor& src, int n_heads, int head_dim, int offset, int width, Tensor& dst) override;
    Routing route_sigmoid(const Tensor& logits, const WeightRef* bias, int n_used, int n_groups, int n_group_used,
                          bool norm, float w_scale) override;
    void attention_latent(const Tensor& q_lat, const Tensor& q_pe, const Tensor& latent, const Tensor& pe,
                          const RowSets& rows, int n_head, float scale, Tensor& out) override;

    cudaStream_t stream() const { return stream_; }

protected:
    // Windows through the driver's virtual memory (cuda_expert_windows.cpp).
    std::unique_ptr<ExpertWindows> make_expert_windows(int64_t n, uint64_t bytes, int64_t device_slots) override;

private:
    struct ResidentRegion {
        const uint8_t* host = nullptr;
        uint64_t bytes = 0;
        uint8_t* device = nullptr;
        bool registered = false;  // host memory mapped for the device, not a copy
        bool window = false;      // expert windows: the addresses are the device's own, owned elsewhere
    };
    // The region holding all of [p, p + bytes), or nullptr.
    const ResidentRegion* region_of(const uint8_t* p, uint64_t bytes) const;
    // The device copy of [p, p + bytes) when it is device memory (not
    // registered host memory or an expert window), else nullptr.
    const uint8_t* device_copy(const uint8_t* p, uint64_t bytes) const;
    // A short-lived device array (ids, positions, small weight vectors),
    // freed in stream order when the last reference goes.
    std::shared_ptr<void> device_scratch(size_t bytes);
    template <class T>
    std::shared_ptr<void> upload_array(const T* host, size_t n);
    // The first n values of a weight as float32 on the device (norm weights,
    // biases, scales); F32 weights are used in place.
    const float* weight_vector(const WeightRef& w, int64_t n, std::shared_ptr<void>& keep);
    float* dequant_buffer(size_t floats);
    // matmul, with x's split rows (nullptr: made here when the product takes them).
    void product(const WeightRef& w, const Tensor& x, Tensor& y, int64_t matrix, const int8_t* x_split);
    // Whether a product of w (its device rows at base) and x runs on split activations.
    bool takes_split(const WeightRef& w, const uint8_t* base, const Tensor& x) const;
    // Zeros over a knocked-out op's output (op_knockout.h).
    void knock_out(float* y, int64_t n);
    // x's rows split for those products (quantize_rows_split), in step memory.
    Tensor split_rows(const Tensor& x);
    // Device memory of `bytes` for a tensor or scratch: stream-ordered from
    // the pool, or from the recording's arena while capturing.
    std::shared_ptr<void> device_alloc(size_t bytes, bool zero);
    // The routed-expert FFN shared by moe_swiglu and moe_swiglu_clamp: on
    // the device for decode-sized batches, else grouped by expert on the host.
    void moe_ffn(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                 const WeightRef& down, const WeightRef* gate_scale, const WeightRef* up_scale,
                 const WeightRef* down_scale, float limit, Tensor& out);
    // The optional per-expert output scales as device float vectors (n_*: their
    // lengths, 1 for one scale of every expert, 0 when absent).
    struct ExpertScales {
        const float *gate = nullptr, *up = nullptr, *down = nullptr;
        int64_t n_gate = 0, n_up = 0, n_down = 0;
        std::shared_ptr<void> keep[3];
    };
    ExpertScales expert_scales(const WeightRef* gate, const WeightRef* up, const WeightRef* down);
    // The chosen experts of a prefill batch and their rows (sorted by expert).
    struct ExpertRows {
        std::vector<int32_t> experts;
        std::vector<int64_t> start, count;
    };
    void grouped_expert_gemm(const WeightRef& w, const ExpertRows& rows, const Tensor& x, Tensor& y);
    // Rows of x (rows[r] of it, or row r, for r < n; k values each) as the
    // tensor-core products read them (cuda::rows_to_half): f16 rows of
    // stride ld and each row's power-of-two scale, in scratch memory.
    struct HalfRows {
        std::shared_ptr<void> keep_h, keep_scale;
        const uint16_t* h = nullptr;
        const float* scale = nullptr;
        int64_t ld = 0;
    };
    HalfRows half_rows(const float* x, int64_t ld_x, const int32_t* rows, int64_t n, int64_t k);
    // Split-K attention's partial results (cuda::attention_merge's input) for
    // n rows of n_head heads cut into n_split key ranges, width values each:
    // the outputs and the (max, sum) pairs, in scratch memory; none (null
    // pointers) for one split.
    struct SplitParts {
        std::shared_ptr<void> keep_o, keep_ml;
        float* o = nullptr;
        float* ml = nullptr;
    };
    SplitParts split_parts(int64_t n, int n_head, int n_split, int64_t width);
    void moe_ffn_grouped(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                         const WeightRef& down, const WeightRef* gate_scale, const WeightRef* up_scale,
                         const WeightRef* down_scale, float limit, Tensor& out);

    struct Arena;
    // Times an op under "op" or "op detail" while profiling; otherwise does
    // nothing (no name is built on the hot path).
    cuda::OpProfile::Scope timed(const char* op, std::string_view detail = {}, uint64_t weight_bytes = 0) {
        if (!profile_.enabled()) return cuda::OpProfile::Scope(nullptr, 0, stream_);
        std::string name(op);
        if (!detail.empty()) name.append(" ").append(detail);
        return profile_.op(name, weight_bytes, stream_);
    }

    cuda::OpProfile profile_;
    cuda::StepTiming step_timing_;
    int device_ = 0;
    std::once_flag aside_once_;
    cudaStream_t aside_ = nullptr;  // download_aside's stream (created on first use)
    void* aside_bounce_ = nullptr;  // two page-locked halves of kAsideChunkBytes
    cudaEvent_t aside_done_[2] = {nullptr, nullptr};
    std::mutex aside_mu_;           // one download_aside at a time (one bounce buffer)
    bool host_weights_ = false;
    bool int8_activations_ = false;  // CudaOptions::int8_activations
    bool f16_prefill_ = false;       // CudaOptions::f16_prefill
    cudaStream_t stream_ = nullptr;
    // router_topk's count of finished blocks: zero between launches (one
    // allocation with merge_counts_, which follows it).
    unsigned* router_counter_ = nullptr;
    // attention's finished splits per (row, head), zero between launches:
    // decode splits keys only while rows x heads stay under ~1,056 blocks.
    static constexpr int64_t kMergeCounts = 4096;
    unsigned* merge_counts_ = nullptr;
    std::shared_ptr<Arena> capturing_;     // the open recording's memory, while capturing
    cuda::L2Ahead l2_ahead_;               // prefetch's side branch (recorded steps only)
    cublasHandle_t cublas_ = nullptr;
    std::vector<ResidentRegion> regions_;  // sorted by host address
    float* dequant_ = nullptr;             // weight rows decoded for cuBLAS (prefill)
    size_t dequant_floats_ = 0;
    std::shared_ptr<int> lifetime_ = std::make_shared<int>(0);
};

// The CUDA backend on `device`; throws ds4::Error with one sentence when the
// build has CUDA but the machine has no usable GPU.
std::unique_ptr<Backend> make_cuda_backend(int device = 0);
std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options);

}  // namespace ds4

#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cublas_library.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/env_switch.h"
#include "backend/cuda/op_knockout.h"
#include "common/error.h"
#include "common/log.h"
#include "mapping/model_map.h"

namespace ds4 {

using cuda::check;

namespace {

// Recorded tensors come from chunks of this size (a decode step of the
// largest models needs a few tens of MiB of activations).
constexpr size_t kArenaChunk = size_t(64) << 20;

// Decoded weight rows handed to cuBLAS at a time (prefill): bounded, so the
// output head of a large vocabulary does not need its full f32 copy.
constexpr size_t kDequantFloats = size_t(64) << 20 >> 2;  // 64 MiB
constexpr int64_t kSmallF32Floats = int64_t(1) << 20;       // 4 MiB of F32 weights

void require_same_size(const Tensor& a, const Tensor& b, const char* op) {
    if (a.size() != b.size())
        throw Error(std::string("CUDA ") + op + ": tensors of " + std::to_string(a.size()) + " and " +
                    std::to_string(b.size()) + " values do not match.");
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device) { return std::make_unique<CudaBackend>(device); }
std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options) {
    return std::make_unique<CudaBackend>(options);
}

// Memory of one recording: bump-allocated, never freed before the recording
// (so every replay finds its tensors where the graph was recorded).
struct CudaBackend::Arena {
    std::vector<void*> chunks;
    size_t used = 0, cap = 0;
    void* take(size_t bytes) {
        bytes = (std::max<size_t>(bytes, 4) + 255) & ~size_t(255);
        if (chunks.empty() || used + bytes > cap) {
            void* p = nullptr;
            cap = std::max(kArenaChunk, bytes);
            check(cudaMalloc(&p, cap), "allocating recording memory");
            chunks.push_back(p);
            used = 0;
        }
        void* p = static_cast<uint8_t*>(chunks.back()) + used;
        used += bytes;
        return p;
    }
    ~Arena() {
        for (void* p : chunks) cudaFree(p);
    }
};

namespace {
struct Recording {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    std::shared_ptr<void> arena;
    ~Recording() {
        if (exec) cudaGraphExecDestroy(exec);
        if (graph) cudaGraphDestroy(graph);
    }
};
}  // namespace

CudaBackend::CudaBackend(int device) : CudaBackend(CudaOptions{device, false}) {}

CudaBackend::CudaBackend(const CudaOptions& options)
    : device_(options.device), host_weights_(options.host_weights), int8_activations_(options.int8_activations),
      f16_prefill_(options.f16_prefill) {
    const int device = options.device;
    const int n = cuda::device_count();
    if (n == 0) throw Error("--backend cuda needs an NVIDIA GPU, and this machine has none usable by CUDA.");
    if (device < 0 || device >= n)
        throw Error("CUDA device " + std::to_string(device) + " does not exist (this machine has " + std::to_string(n) +
                    ").");
    check(cudaSetDevice(device), "cudaSetDevice");
    // Keep freed activation memory in the pool: a forward pass allocates the
    // same sizes again and again.
    cudaMemPool_t pool;
    check(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
    uint64_t keep = UINT64_MAX;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
    // A blocking stream: synchronous copies on the legacy stream still order
    // themselves with it. Not the legacy stream itself, which cannot be captured.
    check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    check(cuda::cublas().create(&cublas_), "cublasCreate");
    check(cuda::cublas().set_stream(cublas_, stream_), "cublasSetStream");
    // Plain FP32 GEMMs: the default math mode never uses TF32 for FP32
    // compute (results must match the CPU backend). The pedantic mode ran
    // the 512-token projections at ~3.6 TFLOP/s on the H200 (bench/NOTES.md).
    check(cuda::cublas().set_math_mode(cublas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    cuda::init_quant_tables();
    if (*cuda::knockout_patterns())
        log_warning(std::string("DS4_CUDA_KNOCKOUT=") + cuda::knockout_patterns() +
                    ": those ops are skipped and every result is wrong (timing only).");
    // The last-block counts of the fused kernels, one allocation.
    check(cudaMalloc(&router_counter_, sizeof(unsigned) * (1 + kMergeCounts)), "allocating the fused kernels' counts");
    check(cudaMemset(router_counter_, 0, sizeof(unsigned) * (1 + kMergeCounts)), "zeroing the fused kernels' counts");
    merge_counts_ = router_counter_ + 1;
}

CudaBackend::~CudaBackend() {
    profile_.report(stderr);
    step_timing_.report(stderr);
    cudaDeviceSynchronize();
    if (cublas_) cuda::cublas().destroy(cublas_);
    for (auto& r : regions_) {
        if (r.window) continue;
        if (r.registered) cudaHostUnregister(const_cast<uint8_t*>(r.host));
        else cudaFree(r.device);
    }
    if (dequant_) cudaFree(dequant_);
    if (router_counter_) cudaFree(router_counter_);  // merge_counts_ too
    if (stream_) cudaStreamDestroy(stream_);
    if (aside_) cudaStreamDestroy(aside_);
    if (aside_bounce_) cudaFreeHost(aside_bounce_);
    for (cudaEvent_t e : aside_done_)
        if (e) cudaEventDestroy(e);
}

// ---- weights -------------------------------------------------------------

void CudaBackend::attach_weights(const ModelMap& map) {
    const auto& regions = map.regions();
    for (size_t i = 0; i < regions.size(); ++i) attach_host_region(map.region_data(i), regions[i].bytes());
    char line[128];
    std::snprintf(line, sizeof line, "cuda: %zu %s, %.2f GiB %s", regions_.size(), regions_.size() == 1 ? "region" : "regions",
                  double(resident_bytes()) / double(uint64_t(1) << 30),
                  host_weights_ ? "in registered host memory" : "resident");
    log_info(line);
}

void CudaBackend::attach_host_region(const uint8_t* host, uint64_t bytes) {
    if (host == nullptr || bytes == 0) return;
    for (const auto& r : regions_)
        if (host < r.host + r.bytes && r.host < host + bytes)
            throw Error("CUDA: a weight region overlaps one already resident.");
    ResidentRegion r{host, bytes, nullptr, false};
    if (host_weights_) {
        // The mapping is read-only (a file mapped for reading): register it
        // as such, or the driver asks for write access it cannot get.
        void* p = const_cast<uint8_t*>(host);
        cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterReadOnly);
        if (e != cudaSuccess) {
            cudaGetLastError();
            throw Error(std::string("CUDA: cannot page-lock a weight region of ") + std::to_string(bytes >> 20) +
                        " MiB for --cuda-host-weights: " + cudaGetErrorString(e) + ".");
        }
        void* dev = nullptr;
        e = cudaHostGetDevicePointer(&dev, p, 0);
        if (e != cudaSuccess) {
            cudaHostUnregister(p);
            check(e, "mapping a registered weight region into the device");
        }
        r.device = static_cast<uint8_t*>(dev);
        r.registered = true;
        regions_.insert(std::upper_bound(regions_.begin(), regions_.end(), r,
                                         [](const ResidentRegion& a, const ResidentRegion& b) { return a.host < b.host; }),
                        r);
        return;
    }
    void* dev = nullptr;
    const cudaError_t e = cudaMalloc(&dev, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        throw Error("CUDA: cannot make a weight region of " + std::to_string(bytes >> 20) +
                    " MiB resident (" + std::to_string(free_b >> 20) + " MiB of device memory free).");
    }
    r.device = static_cast<uint8_t*>(dev);
    check(cudaMemcpy(r.device, host, bytes, cudaMemcpyHostToDevice), "copying a weight region to the device");
    regions_.insert(std::upper_bound(regions_.begin(), regions_.end(), r,
                                     [](const ResidentRegion& a, const ResidentRegion& b) { return a.host < b.host; }),
                    r);
}

void CudaBackend::attach_window_range(const uint8_t* base, uint64_t bytes) {
    for (const auto& r : regions_)
        if (base < r.host + r.bytes && r.host < base + bytes)
            throw Error("CUDA: expert windows overlap a weight region already resident.");
    ResidentRegion r{base, bytes, const_cast<uint8_t*>(base), false, true};
    regions_.insert(std::upper_bound(regions_.begin(), regions_.end(), r,
                                     [](const ResidentRegion& a, const ResidentRegion& b) { return a.host < b.host; }),
                    r);
}

void CudaBackend::forget_window_range(const uint8_t* base) {
    std::erase_if(regions_, [base](const ResidentRegion& r) { return r.window && r.host == base; });
}

void CudaBackend::write_weights(uint8_t* dst, const uint8_t* src, uint64_t bytes) {
    if (bytes == 0) return;
    if (host_weights_) {
        // The ops read these pages over the host link: they must be done
        // with the old bytes before the host overwrites them.
        check(cudaStreamSynchronize(stream_), "waiting before rewriting host-registered weights");
        std::memcpy(dst, src, bytes);
        return;
    }
    // Ordered on the ops' stream: after the ops that read the old bytes,
    // before those that read the new. From pageable memory the driver stages
    // the source before returning, so the caller may release it.
    uint8_t* dev = const_cast<uint8_t*>(device_ptr(dst, bytes, "expert cache slot"));
    check(cudaMemcpyAsync(dev, src, bytes, cudaMemcpyHostToDevice, stream_), "copying weights into a cache slot");
}

uint8_t* CudaBackend::alloc_host_staging(uint64_t bytes) {
    void* p = nullptr;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();  // plain memory then: slower copies, same bytes
        return nullptr;
    }
    return static_cast<uint8_t*>(p);
}

void CudaBackend::free_host_staging(uint8_t* p) {
    if (p) cudaFreeHost(p);
}

uint64_t CudaBackend::resident_bytes() const {
    uint64_t n = 0;
    for (const auto& r : regions_) n += r.bytes;
    return n;
}

const CudaBackend::ResidentRegion* CudaBackend::region_of(const uint8_t* p, uint64_t bytes) const {
    auto it = std::upper_bound(regions_.begin(), regions_.end(), p,
                               [](const uint8_t* q, const ResidentRegion& r) { return q < r.host; });
    if (it == regions_.begin()) return nullptr;
    const ResidentRegion& r = *std::prev(it);
    return p >= r.host && uint64_t(p - r.host) + bytes <= r.bytes ? &r : nullptr;
}

const uint8_t* CudaBackend::device_ptr(const uint8_t* p, uint64_t bytes, const std::string& what) const {
    if (const ResidentRegion* r = region_of(p, bytes)) return r->device + (p - r->host);
    throw Error("weight '" + what + "' is not in device memory: the CUDA backend reads only the model map's regions (" +
                std::to_string(regions_.size()) + " resident).");
}

const uint8_t* CudaBackend::device_copy(const uint8_t* p, uint64_t bytes) const {
    const ResidentRegion* r = region_of(p, bytes);
    return r && !r->registered && !r->window ? r->device + (p - r->host) : nullptr;
}

// Only inside a recorded step: that is where the kernels wait on their first
// loads (a replayed decode step), and a branch recorded there is joined when
// the recording ends; op by op (prefill) the products are long enough.
void CudaBackend::prefetch(const WeightRef* const* w, int n) {
    if (!capturing_ || !cuda::L2Ahead::enabled()) return;
    cuda::L2Ahead::Range r[cuda::L2Ahead::kMaxRanges];
    int m = 0;
    for (int i = 0; i < n && m < cuda::L2Ahead::kMaxRanges; ++i) {
        if (!w[i] || !*w[i]) continue;
        const uint64_t bytes = w[i]->row_bytes * uint64_t(w[i]->ne[1]) * uint64_t(w[i]->ne[2]) * uint64_t(w[i]->ne[3]);
        if (const uint8_t* dev = device_copy(w[i]->data, bytes)) r[m++] = {dev, bytes};
    }
    l2_ahead_.ranges(stream_, r, m);
}

// ---- activations -----------------------------------------------------------

std::shared_ptr<void> CudaBackend::device_alloc(size_t bytes, bool zero) {
    bytes = std::max<size_t>(bytes, 4);
    if (capturing_) {
        // Owned by the recording; the tensor's owner only keeps it alive.
        return std::shared_ptr<void>(capturing_->take(bytes), [keep = capturing_](void*) {});
    }
    void* p = nullptr;
    check(cudaMallocAsync(&p, bytes, stream_), "allocating device memory");
    if (zero) check(cudaMemsetAsync(p, 0, bytes, stream_), "clearing device memory");  // the CPU's are zeroed too
    cudaStream_t s = stream_;
    return std::shared_ptr<void>(p, [s](void* q) { cudaFreeAsync(q, s); });
}

Tensor CudaBackend::alloc(int64_t rows, int64_t cols) {
    Tensor t;
    t.rows = rows;
    t.cols = cols;
    // Recorded tensors are not cleared: every op writes its whole output.
    t.owner = device_alloc(sizeof(float) * size_t(std::max<int64_t>(1, rows * cols)), !capturing_);
    t.data = static_cast<float*>(t.owner.get());
    return t;
}

void CudaBackend::upload(Tensor& t, const float* host) {
    if (capturing_) throw Error("CUDA: a host upload cannot be part of a recorded step.");
    check(cudaMemcpyAsync(t.data, host, sizeof(float) * size_t(t.size()), cudaMemcpyHostToDevice, stream_), "upload");
}

void CudaBackend::download(const Tensor& t, float* host) {
    if (capturing_) throw Error("CUDA: a download cannot be part of a recorded step.");
    // Synchronous: also where a failed kernel of this step reports itself.
    check(cudaMemcpyAsync(host, t.data, sizeof(float) * size_t(t.size()), cudaMemcpyDeviceToHost, stream_), "download");
    check(cudaStreamSynchronize(stream_), "download");
}

void CudaBackend::synchronize() { check(cudaStreamSynchronize(stream_), "synchronize"); }

// Allowed while capturing: from page-locked memory the copy is a node of the
// graph, replayed with the step.
void CudaBackend::copy_in(void* dst, const void* staged, uint64_t bytes) {
    check(cudaMemcpyAsync(dst, staged, bytes, cudaMemcpyHostToDevice, stream_), "copying a step's inputs in");
}

void CudaBackend::copy_out(void* staged, const void* src, uint64_t bytes) {
    check(cudaMemcpyAsync(staged, src, bytes, cudaMemcpyDeviceToHost, stream_), "copying a step's outputs out");
}

void CudaBackend::download_aside(const Tensor& t, float* host) {
    // The calling thread may never have used the device: bind it first.
    check(cudaSetDevice(device_), "download_aside: selecting the device");
    std::call_once(aside_once_, [&] {
        check(cudaStreamCreateWithFlags(&aside_, cudaStreamNonBlocking), "creating the copy stream");
        check(cudaHostAlloc(&aside_bounce_, 2 * kAsideChunkBytes, cudaHostAllocDefault), "allocating the copy buffer");
        for (cudaEvent_t& e : aside_done_)
            check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "creating the copy events");
    });
    // Through page-locked halves, the next half's copy in flight while the
    // last one is moved to `host`: a copy from device to pageable memory
    // held the driver for its whole length, and the scheduler's own calls
    // (allocations, the next step's launches) waited behind it (H100, 2026-12-06).
    std::lock_guard<std::mutex> lock(aside_mu_);
    const auto* src = reinterpret_cast<const uint8_t*>(t.data);
    auto* dst = reinterpret_cast<uint8_t*>(host);
    const size_t total = sizeof(float) * size_t(t.size());
    auto* bounce = static_cast<uint8_t*>(aside_bounce_);
    // Chunk i goes to half i % 2; chunk i - 1 is moved out while chunk i copies.
    const size_t chunks = (total + kAsideChunkBytes - 1) / kAsideChunkBytes;
    auto drain = [&](size_t i) {
        const int half = int(i % 2);
        check(cudaEventSynchronize(aside_done_[half]), "download_aside");
        std::memcpy(dst + i * kAsideChunkBytes, bounce + half * kAsideChunkBytes,
                    std::min(kAsideChunkBytes, total - i * kAsideChunkBytes));
    };
    for (size_t i = 0; i < chunks; ++i) {
        const int half = int(i % 2);
        const size_t off = i * kAsideChunkBytes;
        check(cudaMemcpyAsync(bounce + half * kAsideChunkBytes, src + off, std::min(kAsideChunkBytes, total - off),
                              cudaMemcpyDeviceToHost, aside_),
              "download_aside");
        check(cudaEventRecord(aside_done_[half], aside_), "download_aside");
        if (i > 0) drain(i - 1);
    }
    if (chunks > 0) drain(chunks - 1);
}

IntArray CudaBackend::alloc_ints(int64_t n) {
    IntArray a;
    a.n = n;
    a.owner = device_alloc(sizeof(int32_t) * size_t(std::max<int64_t>(1, n)), !capturing_);
    a.data = static_cast<int32_t*>(a.owner.get());
    return a;
}

void CudaBackend::upload_ints(IntArray& a, const int32_t* host) {
    if (capturing_) throw Error("CUDA: a host upload cannot be part of a recorded step.");
    if (a.n > 0)
        check(cudaMemcpyAsync(a.data, host, sizeof(int32_t) * size_t(a.n), cudaMemcpyHostToDevice, stream_),
              "uploading integers");
}

void CudaBackend::download_ints(const IntArray& a, int32_t* host) {
    if (capturing_) throw Error("CUDA: a download cannot be part of a recorded step.");
    if (a.n <= 0) return;
    check(cudaMemcpyAsync(host, a.data, sizeof(int32_t) * size_t(a.n), cudaMemcpyDeviceToHost, stream_),
          "downloading integers");
    check(cudaStreamSynchronize(stream_), "downloading integers");
}

uint64_t CudaBackend::available_memory() const {
    size_t free_b = 0, total_b = 0;
    check(cudaMemGetInfo(&free_b, &total_b), "asking for the device's free memory");
    return free_b;
}

std::shared_ptr<void> CudaBackend::device_scratch(size_t bytes) { return device_alloc(bytes, false); }

template <class T>
std::shared_ptr<void> CudaBackend::upload_array(const T* host, size_t n) {
    if (capturing_) throw Error("CUDA: a host upload cannot be part of a recorded step.");
    auto buf = device_scratch(sizeof(T) * n);
    if (n) check(cudaMemcpyAsync(buf.get(), host, sizeof(T) * n, cudaMemcpyHostToDevice, stream_), "uploading indices");
    return buf;
}
// Used by the routing/MoE and DeepSeek V4 files too.
template std::shared_ptr<void> CudaBackend::upload_array<int32_t>(const int32_t*, size_t);
template std::shared_ptr<void> CudaBackend::upload_array<float>(const float*, size_t);
template std::shared_ptr<void> CudaBackend::upload_array<const float*>(const float* const*, size_t);
template std::shared_ptr<void> CudaBackend::upload_array<float*>(float* const*, size_t);

// ---- recorded steps (CUDA graphs) --------------------------------------------

void CudaBackend::begin_capture() {
    if (capturing_) throw Error("CUDA: a step is already being recorded.");
    capturing_ = std::make_shared<Arena>();
    // Relaxed: the arena may need a cudaMalloc while recording.
    const cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess) {
        capturing_.reset();
        check(e, "starting to record a step");
    }
}

std::shared_ptr<void> CudaBackend::end_capture() {
    if (!capturing_) return nullptr;
    const cudaError_t joined = l2_ahead_.join(stream_);
    auto rec = std::make_shared<Recording>();
    rec->arena = capturing_;
    capturing_.reset();
    // The stream leaves capture mode whatever happens; a failure here must
    // not stay behind as the runtime's last error, where the next kernel
    // launch's check would report it as its own.
    cudaError_t e = cudaStreamEndCapture(stream_, &rec->graph);
    if (e == cudaSuccess) e = joined;
    if (e == cudaSuccess) e = cudaGraphInstantiate(&rec->exec, rec->graph, 0);
    if (e != cudaSuccess) {
        cudaGetLastError();
        throw Error(std::string("CUDA: recording a step failed: ") + cudaGetErrorString(e) + ".");
    }
    return rec;
}

void CudaBackend::replay(const std::shared_ptr<void>& recording) {
    auto* rec = static_cast<Recording*>(recording.get());
    if (!rec || !rec->exec) throw Error("CUDA: replay of a step that was not recorded.");
    step_timing_.begin(stream_);
    check(cudaGraphLaunch(rec->exec, stream_), "replaying a recorded step");
    step_timing_.end(stream_);
}

const float* CudaBackend::weight_vector(const WeightRef& w, int64_t n, std::shared_ptr<void>& keep) {
    const size_t bytes = ggml_row_bytes(w.type, n);
    const uint8_t* dev = device_ptr(w.data, bytes, w.name);
    if (w.type == GgmlType::F32) return reinterpret_cast<const float*>(dev);
    keep = device_scratch(sizeof(float) * size_t(n));
    cuda::dequantize_rows(w.type, dev, bytes, n, 1, nullptr, static_cast<float*>(keep.get()), n, stream_);
    return static_cast<const float*>(keep.get());
}

CudaBackend::HalfRows CudaBackend::half_rows(const float* x, int64_t ld_x, const int32_t* rows, int64_t n, int64_t k) {
    HalfRows r;
    r.ld = cuda::half_row_stride(k);
    r.keep_h = device_scratch(sizeof(uint16_t) * size_t(n * r.ld));
    r.keep_scale = device_scratch(sizeof(float) * size_t(n));
    auto* h = static_cast<uint16_t*>(r.keep_h.get());
    auto* s = static_cast<float*>(r.keep_scale.get());
    cuda::rows_to_half(x, ld_x, rows, n, k, h, r.ld, s, stream_);
    r.h = h;
    r.scale = s;
    return r;
}

CudaBackend::SplitParts CudaBackend::split_parts(int64_t n, int n_head, int n_split, int64_t width) {
    SplitParts r;
    if (n_split <= 1) return r;
    const size_t slots = size_t(n) * size_t(n_head) * size_t(n_split);
    r.keep_o = device_scratch(sizeof(float) * slots * size_t(width));
    r.keep_ml = device_scratch(sizeof(float) * 2 * slots);
    r.o = static_cast<float*>(r.keep_o.get());
    r.ml = static_cast<float*>(r.keep_ml.get());
    return r;
}

float* CudaBackend::dequant_buffer(size_t floats) {
    if (floats > dequant_floats_) {
        if (capturing_) throw Error("CUDA: prefill-sized products cannot be part of a recorded step.");
        if (dequant_) {
            check(cudaDeviceSynchronize(), "waiting before growing the dequant buffer");
            cudaFree(dequant_);
            dequant_ = nullptr;
        }
        check(cudaMalloc(&dequant_, sizeof(float) * floats), "allocating the dequant buffer");
        dequant_floats_ = floats;
    }
    return dequant_;
}

// ---- ops -----------------------------------------------------------------

void CudaBackend::get_rows(const WeightRef& table, const IntArray& ids, Tensor& out) {
    if (ids.n <= 0) return;
    const auto t = timed("get_rows");
    const uint8_t* dev = device_ptr(table.data, table.row_bytes * size_t(table.ne[1]), table.name);
    cuda::dequantize_rows(table.type, dev, table.row_bytes, table.ne[0], ids.n, ids.data, out.data, out.cols, stream_);
}

// DS4_CUDA_DENSE_TC_TOKENS=N: the tensor cores from N rows on (A/B of
// batched decode; default past the matvec's reach), read once.
static int64_t dense_tc_from() {
    static const int64_t from =
        std::max<int64_t>(1, cuda::env_int("DS4_CUDA_DENSE_TC_TOKENS", cuda::kMatvecMaxTokens + 1));
    return from;
}

// Decode-sized products of Q4_K rows (Q6_K too with DS4_CUDA_DENSE_SPLIT_Q6K=1)
// on exact activations take the int8 tensor cores for every token count alike
// (1-64), so a token's product does not depend on its batch
// (dense_split_mma.cu).
bool CudaBackend::takes_split(const WeightRef& w, const uint8_t* base, const Tensor& x) const {
    return !int8_activations_ && cuda::dense_split_enabled() && x.rows <= cuda::kMatvecMaxTokens &&
           x.rows < dense_tc_from() && cuda::dense_split_supported(w.type, w.ne[0], base, w.row_bytes, x.rows, x.data, x.cols);
}

// A knocked-out op's output (op_knockout.h): zeros, so that what follows
// stays finite and in range (uniform routing, token 0), in the step's order.
void CudaBackend::knock_out(float* y, int64_t n) {
    check(cudaMemsetAsync(y, 0, sizeof(float) * size_t(std::max<int64_t>(n, 0)), stream_), "zeroing a knocked-out op's output");
}

Tensor CudaBackend::split_rows(const Tensor& x) {
    Tensor xs = alloc(x.rows, cuda::split_activation_bytes(x.cols) / 4);
    if (cuda::knocked_out("split")) {
        knock_out(xs.data, xs.size());
        return xs;
    }
    const auto t = timed("split rows");
    cuda::quantize_rows_split(x.data, x.cols, x.rows, x.cols, reinterpret_cast<int8_t*>(xs.data), stream_);
    return xs;
}

// The products that take x's split rows share one split; those among them of
// one type and row length also share one launch (matmuls_split: a block's q,
// k and v, or q and k where v is Q6_K), one kernel boundary fewer each in a
// decode layer's chain. Opt-in (DS4_CUDA_FUSE_QKV=1) until measured on a GPU.
void CudaBackend::matmuls(const Tensor& x, const WeightRef* const* w, Tensor* const* y, int n) {
    static const bool one_launch = cuda::env_switch("DS4_CUDA_FUSE_QKV", false);
    auto base_of = [&](int i) { return device_ptr(w[i]->data, w[i]->row_bytes * uint64_t(w[i]->ne[1]), w[i]->name); };
    auto split_product = [&](int i) {
        return w[i]->ne[0] == x.cols && y[i]->cols == w[i]->ne[1] && takes_split(*w[i], base_of(i), x) &&
               !cuda::knocked_out(w[i]->name);
    };
    Tensor xs;
    std::vector<bool> done(size_t(std::max(n, 0)), false);
    for (int i = 0; i < n; ++i) {
        if (done[i]) continue;
        if (!split_product(i)) {
            product(*w[i], x, *y[i], 0, reinterpret_cast<const int8_t*>(xs.data));
            continue;
        }
        if (!xs.data) xs = split_rows(x);
        cuda::SplitProduct group[cuda::kMaxSplitMatrices];
        int m = 0;
        uint64_t bytes = 0;
        for (int j = i; j < n && m < (one_launch ? cuda::kMaxSplitMatrices : 1); ++j) {
            if (done[j] || w[j]->type != w[i]->type || w[j]->row_bytes != w[i]->row_bytes || !split_product(j))
                continue;
            group[m++] = {base_of(j), w[j]->ne[1], y[j]->data, y[j]->cols};
            bytes += w[j]->row_bytes * uint64_t(w[j]->ne[1]);
            done[j] = true;
        }
        if (x.rows <= 0) continue;
        const auto t = timed("matvec split", ggml_type_name(w[i]->type), bytes);
        cuda::matmuls_split(w[i]->type, w[i]->row_bytes, x.cols, group, m, reinterpret_cast<const int8_t*>(xs.data),
                            x.rows, stream_);
    }
}

void CudaBackend::matmul(const WeightRef& w, const Tensor& x, Tensor& y, int64_t matrix) {
    product(w, x, y, matrix, nullptr);
}

void CudaBackend::product(const WeightRef& w, const Tensor& x, Tensor& y, int64_t matrix, const int8_t* x_split) {
    const int64_t k = w.ne[0], n_rows = w.ne[1], T = x.rows;
    if (x.cols != k)
        throw Error("CUDA matmul: '" + w.name + "' has rows of " + std::to_string(k) + " values, the input " +
                    std::to_string(x.cols) + ".");
    if (matrix < 0 || matrix >= w.ne[2])
        throw Error("CUDA matmul: matrix " + std::to_string(matrix) + " of '" + w.name + "' does not exist.");
    const uint64_t bytes = w.row_bytes * uint64_t(n_rows);
    const uint8_t* base = device_ptr(w.data + size_t(matrix) * w.matrix_bytes, bytes, w.name);
    if (T <= 0 || n_rows <= 0) return;
    if (cuda::knocked_out(w.name)) {
        knock_out(y.data, T * y.cols);
        return;
    }
    const bool tensor_cores = T >= dense_tc_from() && f16_prefill_ && cuda::gemm_f16_supported(w.type, k);
    const bool matvec = T <= cuda::kMatvecMaxTokens && !tensor_cores;
    if (matvec && takes_split(w, base, x)) {
        Tensor xs;
        if (!x_split) xs = split_rows(x);
        const auto t = timed("matvec split", ggml_type_name(w.type), bytes);
        cuda::matmul_split(w.type, base, w.row_bytes, k, n_rows,
                           x_split ? x_split : reinterpret_cast<const int8_t*>(xs.data), T, y.data, y.cols, stream_);
        return;
    }
    const auto t = timed(matvec ? "matvec" : tensor_cores ? "gemm f16" : "gemm", ggml_type_name(w.type), bytes);
    if (matvec) {
        if (int8_activations_ && cuda::matvec_q8_supported(w.type, base, w.row_bytes, k, x.data, x.cols, T)) {
            cuda::matvec_q8(w.type, base, w.row_bytes, k, n_rows, x.data, x.cols, T, y.data, y.cols, stream_);
            return;
        }
        cuda::matvec(w.type, base, w.row_bytes, k, n_rows, x.data, x.cols, T, y.data, y.cols, stream_);
        return;
    }
    if (tensor_cores) {
        const HalfRows xh = half_rows(x.data, x.cols, nullptr, T, k);
        cuda::gemm_f16(w.type, base, 0, w.row_bytes, k, n_rows, nullptr, 0, T, xh.h, xh.ld, xh.scale, y.data, y.cols,
                       stream_);
        return;
    }
    // Small F32 matrices (a Qwen3 router: 128 x 2048) by a tiled kernel of
    // our own: cuBLAS took 1.28 ms a call for that router at 512 tokens on the
    // H200, the matvec kernels 64 tokens at a time 165 us (2026-12-04
    // profiles). Opt-in (DS4_CUDA_SMALL_F32_GEMM=1) until it has run on a GPU;
    // otherwise the matvec kernels.
    if (w.type == GgmlType::F32 && n_rows * k <= kSmallF32Floats) {
        static const bool tiled = cuda::env_switch("DS4_CUDA_SMALL_F32_GEMM", false);
        if (tiled) {
            cuda::small_f32_gemm(reinterpret_cast<const float*>(base), int64_t(w.row_bytes / sizeof(float)), k,
                                 n_rows, x.data, x.cols, T, y.data, y.cols, stream_);
            return;
        }
        for (int64_t t0 = 0; t0 < T; t0 += cuda::kMatvecMaxTokens)
            cuda::matvec(w.type, base, w.row_bytes, k, n_rows, x.data + t0 * x.cols, x.cols,
                         std::min(cuda::kMatvecMaxTokens, T - t0), y.data + t0 * y.cols, y.cols, stream_);
        return;
    }
    // Prefill: y^T (n_rows x T, column-major, ld y.cols) = W (row-major) * x^T.
    const float one = 1.0f, zero = 0.0f;
    if (w.type == GgmlType::F32) {
        check(cuda::cublas().sgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, int(n_rows), int(T), int(k), &one,
                                   reinterpret_cast<const float*>(base), int(w.row_bytes / sizeof(float)), x.data,
                                   int(x.cols), &zero, y.data, int(y.cols)),
              "cublasSgemm");
        return;
    }
    const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(n_rows, int64_t(kDequantFloats) / k));
    float* wf = dequant_buffer(size_t(chunk * k));
    for (int64_t r0 = 0; r0 < n_rows; r0 += chunk) {
        const int64_t m = std::min(chunk, n_rows - r0);
        cuda::dequantize_rows(w.type, base + size_t(r0) * w.row_bytes, w.row_bytes, k, m, nullptr, wf, k, stream_);
        check(cuda::cublas().sgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, int(m), int(T), int(k), &one, wf, int(k),
                                   x.data, int(x.cols), &zero, y.data + r0, int(y.cols)),
              "cublasSgemm");
    }
}

void CudaBackend::rms_norm(const Tensor& x, const WeightRef* weight, float eps, int64_t group, Tensor& y) {
    if (group <= 0 || x.cols % group != 0)
        throw Error("CUDA rms_norm: group " + std::to_string(group) + " does not divide rows of " +
                    std::to_string(x.cols) + ".");
    if (cuda::knocked_out("rms_norm")) {
        knock_out(y.data, y.size());
        return;
    }
    const auto t = timed("rms_norm");
    std::shared_ptr<void> keep;
    const float* wf = weight ? weight_vector(*weight, group, keep) : nullptr;
    cuda::rms_norm(x.data, wf, eps, x.rows * (x.cols / group), group, y.data, stream_);
}

void CudaBackend::rope(Tensor& x, int head_dim, const IntArray& positions, const RopeParams& p) {
    if (x.rows <= 0) return;
    const auto t = timed("rope");
    cuda::rope_partial(x.data, x.rows, x.cols, head_dim, 0, positions.data, p, /*inverse=*/false, stream_);
}

void CudaBackend::kv_store(Tensor& k_cache, Tensor& v_cache, const Tensor& k, const Tensor& v, const CacheRows& rows) {
    if (k.rows != v.rows || k.cols != k_cache.cols || v.cols != v_cache.cols || rows.positions.n < k.rows ||
        rows.slots.n < k.rows || rows.slot_rows <= 0 || k_cache.rows % rows.slot_rows != 0)
        throw Error("CUDA kv_store: key/value rows do not match the cache, the positions or the slots.");
    if (cuda::knocked_out("kv_store")) return;
    const auto t = timed("kv_store");
    cuda::kv_store(k.data, k.cols, v.data, v.cols, rows.positions.data, rows.slots.data, rows.slot_rows, k.rows,
                   k_cache.rows, k_cache.data, v_cache.data, stream_);
}

void CudaBackend::gather_rows(const Tensor& src, const IntArray& rows, Tensor& dst) {
    if (dst.cols != src.cols || rows.n < dst.rows) throw Error("CUDA gather_rows: shapes do not match.");
    const auto t = timed("gather_rows");
    cuda::gather_rows(src.data, src.rows, rows.data, dst.rows, src.cols, dst.data, stream_);
}

void CudaBackend::top_k_rows(const Tensor& x, int k, Tensor& values, IntArray& ids, IntArray& first_bad) {
    check_top_k_shapes(x, k, values, ids, first_bad);
    const auto t = timed("top_k_rows");
    cuda::top_k_rows(x.data, x.rows, x.cols, k, values.data, ids.data, first_bad.data, stream_);
}

void CudaBackend::copy(const Tensor& src, Tensor& dst) {
    require_same_size(src, dst, "copy");
    const auto t = timed("copy");
    check(cudaMemcpyAsync(dst.data, src.data, sizeof(float) * size_t(src.size()), cudaMemcpyDeviceToDevice, stream_),
          "copy");
}

void CudaBackend::attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const CacheRows& rows,
                            const AttentionParams& p, Tensor& out) {
    if (q.rows <= 0) return;
    if (rows.positions.n < q.rows || rows.slots.n < q.rows || rows.slot_rows <= 0)
        throw Error("CUDA attention: the query rows do not match the positions or the slots.");
    // Prefill rows on the tensor cores where the fast prefill is on (its
    // products round activations to f16 already): a sequence's many query
    // rows share each key tile there.
    if (f16_prefill_ && rows.max_seq_rows >= cuda::kTcMinSeqRows &&
        cuda::attention_tc_shape(p, k_cache.data, k_cache.cols, v_cache.data, v_cache.cols)) {
        const auto t = timed("attention_tc");
        cuda::attention_tc(q.data, q.rows, k_cache.data, k_cache.cols, v_cache.data, v_cache.cols, rows.positions.data,
                           rows.slots.data, rows.slot_rows, p, out.data, stream_);
        return;
    }
    if (cuda::knocked_out("attention")) {
        knock_out(out.data, out.size());
        return;
    }
    const auto t = timed("attention");
    const int n_split = cuda::attention_splits(q.rows, p, rows.slot_rows);
    const SplitParts parts = split_parts(q.rows, p.n_head, n_split, p.head_dim_v);
    // DS4_CUDA_FUSE_MERGE=0: the splits merged by a launch of their own (A/B). Read once.
    static const bool fuse_merge = cuda::env_switch("DS4_CUDA_FUSE_MERGE", true);
    cuda::attention(q.data, q.rows, k_cache.data, k_cache.cols, v_cache.data, v_cache.cols, rows.positions.data,
                    rows.slots.data, rows.slot_rows, p, n_split, parts.o, parts.ml, out.data, stream_,
                    fuse_merge ? merge_counts_ : nullptr, kMergeCounts);
}

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
    require_same_size(a, b, "add");
    const auto t = timed("add");
    cuda::add(a.data, b.data, out.data, a.size(), stream_);
}

void CudaBackend::add_rms_norm(Tensor& x, const Tensor& delta, const WeightRef* weight, float eps, Tensor& y) {
    require_same_size(x, delta, "add_rms_norm");
    if (y.rows != x.rows || y.cols != x.cols) throw Error("CUDA add_rms_norm: the output's shape differs from the input's.");
    if (cuda::knocked_out("rms_norm")) {
        knock_out(y.data, y.size());
        return;
    }
    const auto t = timed("add+rms_norm");
    std::shared_ptr<void> keep;
    const float* wf = weight ? weight_vector(*weight, x.cols, keep) : nullptr;
    cuda::add_rms_norm(x.data, delta.data, wf, eps, x.rows, x.cols, y.data, stream_);
}

void CudaBackend::qk_norm_rope(Tensor& q, Tensor& k, const WeightRef& q_norm, const WeightRef& k_norm, float eps,
                               int head_dim, const IntArray& positions, const RopeParams& p) {
    if (!cuda::qk_norm_rope_supported(head_dim, p) || q.rows != k.rows || q.cols % head_dim != 0 ||
        k.cols % head_dim != 0 || positions.n < q.rows) {
        Backend::qk_norm_rope(q, k, q_norm, k_norm, eps, head_dim, positions, p);  // one op at a time
        return;
    }
    if (q.rows <= 0 || cuda::knocked_out("qk_norm_rope")) return;
    const auto t = timed("qk norm+rope");
    std::shared_ptr<void> keep_q, keep_k;
    const float* qw = weight_vector(q_norm, head_dim, keep_q);
    const float* kw = weight_vector(k_norm, head_dim, keep_k);
    cuda::qk_norm_rope(q.data, k.data, q.rows, int(q.cols / head_dim), int(k.cols / head_dim), head_dim, qw, kw, eps,
                       positions.data, p, stream_);
}

void CudaBackend::qk_norm_rope_store(Tensor& q, Tensor& k, const Tensor& v, const WeightRef& q_norm,
                                     const WeightRef& k_norm, float eps, int head_dim, const RopeParams& p,
                                     Tensor& k_cache, Tensor& v_cache, const CacheRows& rows) {
    const bool fits = cuda::qk_norm_rope_supported(head_dim, p) && q.rows == k.rows && k.rows == v.rows &&
                      q.cols % head_dim == 0 && k.cols % head_dim == 0 && k.cols == k_cache.cols &&
                      v.cols == v_cache.cols && rows.positions.n >= q.rows && rows.slots.n >= q.rows &&
                      rows.slot_rows > 0 && k_cache.rows % rows.slot_rows == 0 && v_cache.rows == k_cache.rows;
    // DS4_CUDA_FUSE_KV=0: qk_norm_rope then kv_store, two launches (A/B). Read once.
    static const bool fuse_kv = cuda::env_switch("DS4_CUDA_FUSE_KV", true);
    if (!fits || !fuse_kv) {
        Backend::qk_norm_rope_store(q, k, v, q_norm, k_norm, eps, head_dim, p, k_cache, v_cache, rows);  // two ops
        return;
    }
    if (q.rows <= 0 || cuda::knocked_out("qk_norm_rope")) return;
    const auto t = timed("qk norm+rope+kv_store");
    std::shared_ptr<void> keep_q, keep_k;
    const float* qw = weight_vector(q_norm, head_dim, keep_q);
    const float* kw = weight_vector(k_norm, head_dim, keep_k);
    cuda::qk_norm_rope_store(q.data, k.data, v.data, q.rows, int(q.cols / head_dim), int(k.cols / head_dim), head_dim,
                             v.cols, qw, kw, eps, rows.positions.data, rows.slots.data, rows.slot_rows, k_cache.rows,
                             k_cache.data, v_cache.data, p, stream_);
}

void CudaBackend::scale(Tensor& x, float s) {
    const auto prof = timed("scale");
    cuda::scale(x.data, s, x.size(), stream_);
}

void CudaBackend::mul_row(Tensor& x, const WeightRef& w) {
    const int64_t n = w.ne[0] * w.ne[1] * w.ne[2] * w.ne[3];
    std::shared_ptr<void> keep;
    const float* wf = weight_vector(w, n, keep);
    cuda::mul_row(x.data, x.rows, x.cols, wf, n, stream_);
}

void CudaBackend::add_row(Tensor& x, const WeightRef& b) {
    const auto prof = timed("add row");
    std::shared_ptr<void> keep;
    const float* bf = weight_vector(b, x.cols, keep);
    cuda::add_row(x.data, x.rows, x.cols, bf, stream_);
}

void CudaBackend::swiglu(const Tensor& gate, const Tensor& up, Tensor& out) {
    const auto prof = timed("swiglu");
    require_same_size(gate, up, "swiglu");
    cuda::swiglu(gate.data, up.data, out.data, gate.size(), stream_);
}

Routing CudaBackend::route_softmax_topk(const Tensor& logits, int n_used, bool norm, float w_scale) {
    Routing r = new_routing(logits.rows, n_used);
    const auto t = timed("route softmax");
    cuda::route_topk(cuda::RouteScore::Softmax, logits.data, logits.rows, int(logits.cols), n_used, nullptr, nullptr, nullptr,
                     norm, w_scale, r.experts.data, r.weights.data, stream_);
    return r;
}

Routing CudaBackend::router_softmax_topk(const WeightRef& router, const Tensor& x, Tensor& logits, int n_used,
                                         bool norm, float w_scale) {
    // DS4_CUDA_FUSE_ROUTER=0: the router's product and the routing as two launches (A/B). Read once.
    static const bool fuse_router = cuda::env_switch("DS4_CUDA_FUSE_ROUTER", true);
    // What product() would run for it: the F32 matvec (not int8 activations).
    const bool fits = fuse_router && !int8_activations_ && router.type == GgmlType::F32 && router.ne[2] == 1 &&
                      router.ne[0] == x.cols && logits.rows == x.rows && logits.cols == router.ne[1] &&
                      x.rows >= 1 && x.rows <= 4;
    const uint8_t* base =
        fits ? device_ptr(router.data, router.row_bytes * uint64_t(router.ne[1]), router.name) : nullptr;
    if (!fits || !cuda::router_topk_supported(base, router.row_bytes, router.ne[0], router.ne[1], x.data, x.cols,
                                              x.rows, n_used))
        return Backend::router_softmax_topk(router, x, logits, n_used, norm, w_scale);  // two launches
    Routing r = new_routing(logits.rows, n_used);
    const auto t = timed("router+route", "f32", router.row_bytes * uint64_t(router.ne[1]));
    cuda::router_topk(base, router.row_bytes, router.ne[0], router.ne[1], x.data, x.cols, x.rows, logits.data, n_used,
                      norm, w_scale, r.experts.data, r.weights.data, router_counter_, stream_);
    return r;
}

void CudaBackend::count_experts(const Routing& routing, IntArray& counts) {
    const auto t = timed("count experts");
    cuda::count_experts(routing.experts.data, routing.rows * routing.n_used, counts.data, counts.n, stream_);
}

void CudaBackend::moe_swiglu(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                             const WeightRef& down, const WeightRef* gate_scale, const WeightRef* up_scale,
                             const WeightRef* down_scale, Tensor& out) {
    moe_ffn(x, routing, gate, up, down, gate_scale, up_scale, down_scale, 0.0f, out);
}

}  // namespace ds4

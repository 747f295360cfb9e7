#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"
#include "common/error.h"
#include "mapping/model_map.h"

namespace ds4 {

using cuda::check;

namespace {

// Everything runs on the legacy default stream: host copies, kernels,
// cuBLAS and stream-ordered allocations order themselves without events.
constexpr cudaStream_t kStream = nullptr;

// Decoded weight rows handed to cuBLAS at a time (prefill): bounded, so the
// output head of a large vocabulary does not need its full f32 copy.
constexpr size_t kDequantFloats = size_t(64) << 20 >> 2;  // 64 MiB

void require_same_size(const Tensor& a, const Tensor& b, const char* op) {
    if (a.size() != b.size())
        throw Error(std::string("CUDA ") + op + ": tensors of " + std::to_string(a.size()) + " and " +
                    std::to_string(b.size()) + " values do not match.");
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device) { return std::make_unique<CudaBackend>(device); }

CudaBackend::CudaBackend(int device) : device_(device) {
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
    check(cublasCreate(&cublas_), "cublasCreate");
    check(cublasSetStream(cublas_, kStream), "cublasSetStream");
    // Plain FP32 GEMMs (no TF32): the results must match the CPU backend.
    check(cublasSetMathMode(cublas_, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
    cuda::init_quant_tables();
    host_ = make_cpu_backend(1);
}

CudaBackend::~CudaBackend() {
    cudaDeviceSynchronize();
    if (cublas_) cublasDestroy(cublas_);
    for (auto& r : regions_) cudaFree(r.device);
    if (dequant_) cudaFree(dequant_);
}

// ---- weights -------------------------------------------------------------

void CudaBackend::attach_weights(const ModelMap& map) {
    const auto& regions = map.regions();
    for (size_t i = 0; i < regions.size(); ++i) attach_host_region(map.region_data(i), regions[i].bytes());
    std::fprintf(stderr, "cuda: %zu %s, %.2f GiB resident\n", regions_.size(), regions_.size() == 1 ? "region" : "regions",
                 double(resident_bytes()) / double(uint64_t(1) << 30));
}

void CudaBackend::attach_host_region(const uint8_t* host, uint64_t bytes) {
    if (host == nullptr || bytes == 0) return;
    for (const auto& r : regions_)
        if (host < r.host + r.bytes && r.host < host + bytes)
            throw Error("CUDA: a weight region overlaps one already resident.");
    ResidentRegion r{host, bytes, nullptr};
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

uint64_t CudaBackend::resident_bytes() const {
    uint64_t n = 0;
    for (const auto& r : regions_) n += r.bytes;
    return n;
}

const uint8_t* CudaBackend::device_ptr(const uint8_t* p, uint64_t bytes, const std::string& what) const {
    auto it = std::upper_bound(regions_.begin(), regions_.end(), p,
                               [](const uint8_t* q, const ResidentRegion& r) { return q < r.host; });
    if (it != regions_.begin()) {
        const ResidentRegion& r = *std::prev(it);
        const uint64_t off = uint64_t(p - r.host);
        if (p >= r.host && off + bytes <= r.bytes) return r.device + off;
    }
    throw Error("weight '" + what + "' is not in device memory: the CUDA backend reads only the model map's regions (" +
                std::to_string(regions_.size()) + " resident).");
}

// ---- activations -----------------------------------------------------------

Tensor CudaBackend::alloc(int64_t rows, int64_t cols) {
    Tensor t;
    t.rows = rows;
    t.cols = cols;
    void* p = nullptr;
    const size_t bytes = sizeof(float) * size_t(std::max<int64_t>(1, rows * cols));
    check(cudaMallocAsync(&p, bytes, kStream), "allocating an activation tensor");
    check(cudaMemsetAsync(p, 0, bytes, kStream), "clearing an activation tensor");  // the CPU's are zeroed too
    t.data = static_cast<float*>(p);
    t.owner = std::shared_ptr<void>(p, [](void* q) { cudaFreeAsync(q, kStream); });
    return t;
}

void CudaBackend::upload(Tensor& t, const float* host) {
    check(cudaMemcpy(t.data, host, sizeof(float) * size_t(t.size()), cudaMemcpyHostToDevice), "upload");
}

void CudaBackend::download(const Tensor& t, float* host) {
    // Synchronous: also where a failed kernel of this step reports itself.
    check(cudaMemcpy(host, t.data, sizeof(float) * size_t(t.size()), cudaMemcpyDeviceToHost), "download");
}

std::shared_ptr<void> CudaBackend::device_scratch(size_t bytes) {
    void* p = nullptr;
    check(cudaMallocAsync(&p, std::max<size_t>(bytes, 4), kStream), "allocating device scratch");
    return std::shared_ptr<void>(p, [](void* q) { cudaFreeAsync(q, kStream); });
}

template <class T>
std::shared_ptr<void> CudaBackend::upload_array(const T* host, size_t n) {
    auto buf = device_scratch(sizeof(T) * n);
    if (n) check(cudaMemcpy(buf.get(), host, sizeof(T) * n, cudaMemcpyHostToDevice), "uploading indices");
    return buf;
}

const float* CudaBackend::weight_vector(const WeightRef& w, int64_t n, std::shared_ptr<void>& keep) {
    const size_t bytes = ggml_row_bytes(w.type, n);
    const uint8_t* dev = device_ptr(w.data, bytes, w.name);
    if (w.type == GgmlType::F32) return reinterpret_cast<const float*>(dev);
    keep = device_scratch(sizeof(float) * size_t(n));
    cuda::dequantize_rows(w.type, dev, bytes, n, 1, nullptr, static_cast<float*>(keep.get()), n, kStream);
    return static_cast<const float*>(keep.get());
}

float* CudaBackend::dequant_buffer(size_t floats) {
    if (floats > dequant_floats_) {
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

void CudaBackend::get_rows(const WeightRef& table, const int32_t* ids, int64_t n, Tensor& out) {
    for (int64_t i = 0; i < n; ++i) {
        if (ids[i] < 0 || ids[i] >= table.ne[1])
            throw Error("token id " + std::to_string(ids[i]) + " is outside the vocabulary of " +
                        std::to_string(table.ne[1]) + " tokens.");
    }
    if (n <= 0) return;
    const uint8_t* dev = device_ptr(table.data, table.row_bytes * size_t(table.ne[1]), table.name);
    auto d_ids = upload_array(ids, size_t(n));
    cuda::dequantize_rows(table.type, dev, table.row_bytes, table.ne[0], n, static_cast<const int32_t*>(d_ids.get()),
                          out.data, out.cols, kStream);
}

void CudaBackend::matmul(const WeightRef& w, const Tensor& x, Tensor& y, int64_t matrix) {
    const int64_t k = w.ne[0], n_rows = w.ne[1], T = x.rows;
    if (x.cols != k)
        throw Error("CUDA matmul: '" + w.name + "' has rows of " + std::to_string(k) + " values, the input " +
                    std::to_string(x.cols) + ".");
    if (matrix < 0 || matrix >= w.ne[2])
        throw Error("CUDA matmul: matrix " + std::to_string(matrix) + " of '" + w.name + "' does not exist.");
    const uint64_t bytes = w.row_bytes * uint64_t(n_rows);
    const uint8_t* base = device_ptr(w.data + size_t(matrix) * w.matrix_bytes, bytes, w.name);
    if (T <= 0 || n_rows <= 0) return;
    if (T <= cuda::kMatvecMaxTokens) {
        cuda::matvec(w.type, base, w.row_bytes, k, n_rows, x.data, x.cols, T, y.data, y.cols, kStream);
        return;
    }
    // Prefill: y^T (n_rows x T, column-major, ld y.cols) = W (row-major) * x^T.
    const float one = 1.0f, zero = 0.0f;
    if (w.type == GgmlType::F32) {
        check(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, int(n_rows), int(T), int(k), &one,
                          reinterpret_cast<const float*>(base), int(w.row_bytes / sizeof(float)), x.data, int(x.cols),
                          &zero, y.data, int(y.cols)),
              "cublasSgemm");
        return;
    }
    const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(n_rows, int64_t(kDequantFloats) / k));
    float* wf = dequant_buffer(size_t(chunk * k));
    for (int64_t r0 = 0; r0 < n_rows; r0 += chunk) {
        const int64_t m = std::min(chunk, n_rows - r0);
        cuda::dequantize_rows(w.type, base + size_t(r0) * w.row_bytes, w.row_bytes, k, m, nullptr, wf, k, kStream);
        check(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, int(m), int(T), int(k), &one, wf, int(k), x.data,
                          int(x.cols), &zero, y.data + r0, int(y.cols)),
              "cublasSgemm");
    }
}

void CudaBackend::rms_norm(const Tensor& x, const WeightRef* weight, float eps, int64_t group, Tensor& y) {
    if (group <= 0 || x.cols % group != 0)
        throw Error("CUDA rms_norm: group " + std::to_string(group) + " does not divide rows of " +
                    std::to_string(x.cols) + ".");
    std::shared_ptr<void> keep;
    const float* wf = weight ? weight_vector(*weight, group, keep) : nullptr;
    cuda::rms_norm(x.data, wf, eps, x.rows * (x.cols / group), group, y.data, kStream);
}

void CudaBackend::rope(Tensor& x, int head_dim, const int32_t* positions, const RopeParams& p) {
    if (x.rows <= 0) return;
    auto d_pos = upload_array(positions, size_t(x.rows));
    cuda::rope(x.data, x.rows, x.cols, head_dim, static_cast<const int32_t*>(d_pos.get()), p, kStream);
}

void CudaBackend::kv_store(Tensor& k_cache, Tensor& v_cache, const Tensor& k, const Tensor& v, int64_t pos0) {
    if (pos0 + k.rows > k_cache.rows)
        throw Error("the context of " + std::to_string(k_cache.rows) + " tokens is full (position " +
                    std::to_string(pos0 + k.rows) + " requested); raise --ctx.");
    check(cudaMemcpyAsync(k_cache.data + pos0 * k_cache.cols, k.data, sizeof(float) * size_t(k.size()),
                          cudaMemcpyDeviceToDevice, kStream),
          "kv_store");
    check(cudaMemcpyAsync(v_cache.data + pos0 * v_cache.cols, v.data, sizeof(float) * size_t(v.size()),
                          cudaMemcpyDeviceToDevice, kStream),
          "kv_store");
}

void CudaBackend::attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t pos0,
                            const AttentionParams& p, Tensor& out) {
    cuda::attention(q.data, q.rows, k_cache.data, k_cache.cols, v_cache.data, v_cache.cols, pos0, p, out.data, kStream);
}

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
    require_same_size(a, b, "add");
    cuda::add(a.data, b.data, out.data, a.size(), kStream);
}

void CudaBackend::scale(Tensor& x, float s) { cuda::scale(x.data, s, x.size(), kStream); }

void CudaBackend::mul_row(Tensor& x, const WeightRef& w) {
    const int64_t n = w.ne[0] * w.ne[1] * w.ne[2] * w.ne[3];
    std::shared_ptr<void> keep;
    const float* wf = weight_vector(w, n, keep);
    cuda::mul_row(x.data, x.rows, x.cols, wf, n, kStream);
}

void CudaBackend::add_row(Tensor& x, const WeightRef& b) {
    std::shared_ptr<void> keep;
    const float* bf = weight_vector(b, x.cols, keep);
    cuda::add_row(x.data, x.rows, x.cols, bf, kStream);
}

void CudaBackend::swiglu(const Tensor& gate, const Tensor& up, Tensor& out) {
    require_same_size(gate, up, "swiglu");
    cuda::swiglu(gate.data, up.data, out.data, gate.size(), kStream);
}

// The router logits are tokens x experts floats: they come back to the host
// and the CPU reference chooses, so both backends route identically (a
// device top-k is later work, with the CUDA-graph decode step).
Routing CudaBackend::route_softmax_topk(const Tensor& logits, int n_used, bool norm, float w_scale) {
    Tensor host = host_->alloc(logits.rows, logits.cols);
    download(logits, host.data);
    return host_->route_softmax_topk(host, n_used, norm, w_scale);
}

void CudaBackend::moe_swiglu(const Tensor& x, const Routing& routing, const WeightRef& gate, const WeightRef& up,
                             const WeightRef& down, const WeightRef* gate_scale, const WeightRef* up_scale,
                             const WeightRef* down_scale, Tensor& out) {
    const int64_t n_exp = gate.ne[2], n_ff = gate.ne[1], n_embd = x.cols;
    check(cudaMemsetAsync(out.data, 0, sizeof(float) * size_t(out.size()), kStream), "moe_swiglu");
    if (x.rows <= 0) return;
    // (token, slot) pairs grouped by expert, as on the CPU: each selected
    // expert's weights are read once per call, unselected ones never.
    std::vector<std::vector<int64_t>> by_expert(static_cast<size_t>(n_exp));
    for (int64_t t = 0; t < x.rows; ++t)
        for (int j = 0; j < routing.n_used; ++j) {
            const int32_t e = routing.experts[size_t(t * routing.n_used + j)];
            if (e < 0 || e >= n_exp)
                throw Error("routing chose expert " + std::to_string(e) + " of " + std::to_string(n_exp) + ".");
            by_expert[size_t(e)].push_back(t * routing.n_used + j);
        }
    std::vector<int32_t> rows;  // token of each pair, expert by expert
    std::vector<float> weights;
    std::vector<int64_t> begin(size_t(n_exp) + 1, 0);
    int64_t max_m = 0;
    for (int64_t e = 0; e < n_exp; ++e) {
        begin[size_t(e)] = int64_t(rows.size());
        for (int64_t s : by_expert[size_t(e)]) {
            rows.push_back(int32_t(s / routing.n_used));
            weights.push_back(routing.weights[size_t(s)]);
        }
        max_m = std::max<int64_t>(max_m, int64_t(by_expert[size_t(e)].size()));
    }
    begin[size_t(n_exp)] = int64_t(rows.size());
    auto d_rows = upload_array(rows.data(), rows.size());
    auto d_weights = upload_array(weights.data(), weights.size());
    auto expert_scale = [](const WeightRef* s, int64_t e) {
        if (!s) return 1.0f;
        const float* v = reinterpret_cast<const float*>(s->data);  // host copy, as the CPU reads it
        return s->ne[0] > 1 ? v[e] : v[0];
    };
    Tensor xs_all = alloc(max_m, n_embd), g_all = alloc(max_m, n_ff), u_all = alloc(max_m, n_ff),
           d_all = alloc(max_m, n_embd);
    auto view = [](const Tensor& t, int64_t m) {
        Tensor v = t;
        v.rows = m;
        return v;
    };
    for (int64_t e = 0; e < n_exp; ++e) {
        const int64_t m = begin[size_t(e) + 1] - begin[size_t(e)];
        if (m == 0) continue;
        Tensor xs = view(xs_all, m), g = view(g_all, m), u = view(u_all, m), d = view(d_all, m);
        const int32_t* er = static_cast<const int32_t*>(d_rows.get()) + begin[size_t(e)];
        cuda::gather_rows(x.data, n_embd, er, m, xs.data, kStream);
        matmul(gate, xs, g, e);
        matmul(up, xs, u, e);
        if (gate_scale) scale(g, expert_scale(gate_scale, e));
        if (up_scale) scale(u, expert_scale(up_scale, e));
        swiglu(g, u, g);
        matmul(down, g, d, e);
        cuda::scatter_add_rows(d.data, n_embd, er, static_cast<const float*>(d_weights.get()) + begin[size_t(e)],
                               expert_scale(down_scale, e), m, out.data, kStream);
    }
}

}  // namespace ds4

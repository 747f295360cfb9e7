// Whether the experts-in-RAM design can keep the MoE kernels as they are (bench/NOTES.md, issue 11): every
// (block, expert) gets a fixed window of the GPU's virtual address space, backed by page-locked host memory
// (cuMemCreate with a HOST location) or, once the expert is promoted, by device memory mapped at the same address;
// a kernel computes W + e * stride as today and reads whichever backs the window. What it measures: the driver's
// allocation granularity for both locations; whether the CPU can write host allocations through the mapping;
// a kernel's read rate over host-backed windows, device-backed windows and half of each; what one remap (unmap,
// map the other backing, set access) costs on the host. Build: nvcc -O3 -arch=sm_90 -o vmm_probe vmm_probe.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)
#define DK(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { const char* s = nullptr; cuGetErrorString(r, &s); std::printf("%s: %s\n", #x, s ? s : "?"); std::exit(1); } } while (0)

// Block b reads window (b % n_win) bytes [part * per, (part + 1) * per), part = b / n_win.
__global__ void read_windows(const uint8_t* base, size_t stride, size_t per, unsigned n_win, unsigned* sink) {
  const unsigned win = blockIdx.x % n_win, part = blockIdx.x / n_win;
  const uint4* src = reinterpret_cast<const uint4*>(base + size_t(win) * stride + size_t(part) * per);
  unsigned acc = 0;
  for (size_t i = threadIdx.x; i < per / 16; i += blockDim.x) { const uint4 v = src[i]; acc ^= v.x ^ v.y ^ v.z ^ v.w; }
  if (acc == 0x12345678u) *sink = acc;
}

static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int main(int argc, char** argv) {
  const int n_win = argc > 1 ? std::atoi(argv[1]) : 256;           // experts
  const size_t expert = size_t(argc > 2 ? std::atof(argv[2]) * 1048576 : 2.92 * 1048576);  // bytes of one
  CK(cudaFree(nullptr));
  CUdevice dev; DK(cuCtxGetDevice(&dev));
  CUmemAllocationProp hp{}; hp.type = CU_MEM_ALLOCATION_TYPE_PINNED; hp.location.type = CU_MEM_LOCATION_TYPE_HOST; hp.location.id = 0;
  CUmemAllocationProp dp{}; dp.type = CU_MEM_ALLOCATION_TYPE_PINNED; dp.location.type = CU_MEM_LOCATION_TYPE_DEVICE; dp.location.id = int(dev);
  size_t hg_min = 0, hg_rec = 0, dg_min = 0, dg_rec = 0;
  DK(cuMemGetAllocationGranularity(&hg_min, &hp, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  DK(cuMemGetAllocationGranularity(&hg_rec, &hp, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  DK(cuMemGetAllocationGranularity(&dg_min, &dp, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  DK(cuMemGetAllocationGranularity(&dg_rec, &dp, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  std::printf("granularity: host min %zu rec %zu; device min %zu rec %zu\n", hg_min, hg_rec, dg_min, dg_rec);
  const size_t g = hg_min > dg_min ? hg_min : dg_min;
  const size_t stride = (expert + g - 1) / g * g;
  std::printf("%d windows of %.2f MiB (expert %.2f MiB, %.0f %% padding)\n", n_win, stride / 1048576.0,
              expert / 1048576.0, 100.0 * (stride - expert) / expert);
  CUdeviceptr va = 0; DK(cuMemAddressReserve(&va, stride * n_win, g, 0, 0));
  std::vector<CUmemGenericAllocationHandle> host(n_win), devm(n_win);
  CUmemAccessDesc acc[2]{};
  acc[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE; acc[0].location.id = int(dev); acc[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  acc[1].location.type = CU_MEM_LOCATION_TYPE_HOST; acc[1].location.id = 0; acc[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  double t0 = now();
  for (int i = 0; i < n_win; ++i) DK(cuMemCreate(&host[i], stride, &hp, 0));
  const double t_create = now() - t0;
  for (int i = 0; i < n_win; ++i) DK(cuMemMap(va + i * stride, stride, 0, host[i], 0));
  const CUresult host_access = cuMemSetAccess(va, stride * n_win, acc, 2);
  const char* why = nullptr; cuGetErrorString(host_access, &why);
  std::printf("host allocations: %.2f ms each to create; device + host access: %s\n", t_create / n_win * 1e3, why);
  if (host_access != CUDA_SUCCESS) DK(cuMemSetAccess(va, stride * n_win, acc, 1));
  // Fill: through the mapping from the CPU if it may, else by copies.
  std::vector<uint8_t> pattern(stride);
  for (size_t i = 0; i < stride; ++i) pattern[i] = uint8_t(i * 7 + 1);
  t0 = now();
  if (host_access == CUDA_SUCCESS) {
    for (int i = 0; i < n_win; ++i) std::memcpy(reinterpret_cast<void*>(va + i * stride), pattern.data(), stride);
  } else {
    for (int i = 0; i < n_win; ++i) CK(cudaMemcpy(reinterpret_cast<void*>(va + i * stride), pattern.data(), stride, cudaMemcpyHostToDevice));
  }
  std::printf("fill %s: %.1f GB/s\n", host_access == CUDA_SUCCESS ? "by the CPU through the mapping" : "by copies",
              stride * double(n_win) / (now() - t0) / 1e9);
  for (int i = 0; i < n_win; ++i) DK(cuMemCreate(&devm[i], stride, &dp, 0));
  unsigned* sink; CK(cudaMalloc(&sink, 4));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  const unsigned parts = 16;  // blocks a window
  const size_t per = stride / parts / 16 * 16;
  auto run = [&](const char* what) {
    float best = 1e30f;
    for (int rep = 0; rep < 4; ++rep) {
      CK(cudaEventRecord(e0));
      read_windows<<<n_win * parts, 256>>>(reinterpret_cast<const uint8_t*>(va), stride, per, n_win, sink);
      CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1)); CK(cudaGetLastError());
      float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (ms < best) best = ms;
    }
    std::printf("%-34s %.3f ms, %.1f GB/s\n", what, best, double(per) * parts * n_win / best / 1e6);
  };
  run("all windows host-backed:");
  // Remap: the odd windows to device memory (their bytes copied first through a second mapping).
  CUdeviceptr staging = 0; DK(cuMemAddressReserve(&staging, stride * n_win, g, 0, 0));
  for (int i = 1; i < n_win; i += 2) {
    DK(cuMemMap(staging + i * stride, stride, 0, devm[i], 0));
    DK(cuMemSetAccess(staging + i * stride, stride, acc, 1));
    CK(cudaMemcpy(reinterpret_cast<void*>(staging + i * stride), pattern.data(), stride, cudaMemcpyHostToDevice));
  }
  t0 = now();
  int remaps = 0;
  for (int i = 1; i < n_win; i += 2, ++remaps) {
    DK(cuMemUnmap(va + i * stride, stride));
    DK(cuMemMap(va + i * stride, stride, 0, devm[i], 0));
    DK(cuMemSetAccess(va + i * stride, stride, acc, 1));
  }
  std::printf("remap host -> device: %.1f us each (%d)\n", (now() - t0) / remaps * 1e6, remaps);
  run("half host, half device (alternating):");
  t0 = now();
  for (int i = 0; i < n_win; i += 2) {
    DK(cuMemUnmap(va + i * stride, stride));
    DK(cuMemMap(va + i * stride, stride, 0, devm[i], 0));
    DK(cuMemSetAccess(va + i * stride, stride, acc, 1));
  }
  std::printf("remap host -> device (unfilled): %.1f us each\n", (now() - t0) / (n_win / 2) * 1e6);
  run("all windows device-backed:");
  // Back to host: what an eviction costs.
  t0 = now();
  for (int i = 0; i < n_win; ++i) {
    DK(cuMemUnmap(va + i * stride, stride));
    DK(cuMemMap(va + i * stride, stride, 0, host[i], 0));
    DK(cuMemSetAccess(va + i * stride, stride, acc, host_access == CUDA_SUCCESS ? 2 : 1));
  }
  std::printf("remap device -> host: %.1f us each\n", (now() - t0) / n_win * 1e6);
  run("all windows host-backed again:");
  // Which of the three calls a remap pays for, and whether one access call can serve many remapped windows
  // (the range must be wholly mapped, which every window always is): host -> device for the first half, timed
  // call by call, then back, then again with one cuMemSetAccess over each run of k consecutive windows.
  {
    const int half = n_win / 2;
    double t_un = 0, t_map = 0, t_acc = 0;
    for (int i = 0; i < half; ++i) {
      double a = now(); DK(cuMemUnmap(va + i * stride, stride));
      double b = now(); DK(cuMemMap(va + i * stride, stride, 0, devm[i], 0));
      double c = now(); DK(cuMemSetAccess(va + i * stride, stride, acc, 1));
      double d = now();
      t_un += b - a; t_map += c - b; t_acc += d - c;
    }
    std::printf("remap by call: unmap %.1f us, map %.1f us, set access %.1f us (each, %d windows)\n",
                t_un / half * 1e6, t_map / half * 1e6, t_acc / half * 1e6, half);
    for (int i = 0; i < half; ++i) {
      DK(cuMemUnmap(va + i * stride, stride));
      DK(cuMemMap(va + i * stride, stride, 0, host[i], 0));
      DK(cuMemSetAccess(va + i * stride, stride, acc, host_access == CUDA_SUCCESS ? 2 : 1));
    }
    for (const int k : {4, 16, 64}) {
      if (k > half) break;
      const int runs = half / k;
      t0 = now();
      for (int q = 0; q < runs; ++q) {
        for (int i = q * k; i < (q + 1) * k; ++i) {
          DK(cuMemUnmap(va + i * stride, stride));
          DK(cuMemMap(va + i * stride, stride, 0, devm[i], 0));
        }
        DK(cuMemSetAccess(va + size_t(q) * k * stride, stride * k, acc, 1));
      }
      const double to_dev = (now() - t0) / (runs * k);
      t0 = now();
      for (int q = 0; q < runs; ++q) {
        for (int i = q * k; i < (q + 1) * k; ++i) {
          DK(cuMemUnmap(va + i * stride, stride));
          DK(cuMemMap(va + i * stride, stride, 0, host[i], 0));
        }
        DK(cuMemSetAccess(va + size_t(q) * k * stride, stride * k, acc, host_access == CUDA_SUCCESS ? 2 : 1));
      }
      std::printf("remap in runs of %d, one set access a run: host -> device %.1f us, back %.1f us (each)\n", k,
                  to_dev * 1e6, (now() - t0) / (runs * k) * 1e6);
    }
    // One window remapped, access set over a span of 64 windows around it (a scattered step's batch).
    if (n_win >= 64) {
      t0 = now();
      for (int i = 0; i < 8; ++i) {
        DK(cuMemUnmap(va + i * 8 * stride, stride));
        DK(cuMemMap(va + i * 8 * stride, stride, 0, devm[i * 8], 0));
      }
      DK(cuMemSetAccess(va, stride * 64, acc, 1));
      std::printf("8 scattered windows remapped, one set access over 64: %.1f us each\n", (now() - t0) / 8 * 1e6);
      for (int i = 0; i < 8; ++i) {
        DK(cuMemUnmap(va + i * 8 * stride, stride));
        DK(cuMemMap(va + i * 8 * stride, stride, 0, host[i * 8], 0));
      }
      DK(cuMemSetAccess(va, stride * 64, acc, host_access == CUDA_SUCCESS ? 2 : 1));
    }
    run("all windows host-backed after the runs:");
  }
  // A kernel in flight while the host remaps another window: does the remap wait for it?
  t0 = now();
  // (windows 1.. only: window 0 is the one remapped)
  read_windows<<<(n_win - 1) * parts * 4, 256>>>(reinterpret_cast<const uint8_t*>(va + stride), stride, per / 4,
                                                 n_win - 1, sink);
  const double launched = now();
  DK(cuMemUnmap(va + 0 * stride, stride));
  DK(cuMemMap(va + 0 * stride, stride, 0, devm[0], 0));
  DK(cuMemSetAccess(va + 0 * stride, stride, acc, 1));
  const double remapped = now();
  CK(cudaDeviceSynchronize());
  std::printf("remap during a kernel: launch %.1f us, remap returned after %.1f us, kernel done after %.1f us\n",
              (launched - t0) * 1e6, (remapped - t0) * 1e6, (now() - t0) * 1e6);
  return 0;
}
